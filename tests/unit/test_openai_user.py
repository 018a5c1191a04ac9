"""`user` at the OpenAI door: a string names the user (OpenAI's field), and so does the id of the
account object Open WebUI sends for a model it serves as a pipeline; anything else is refused."""
import pytest
from pydantic import ValidationError

from serve.schemas import ChatCompletionRequest, ClientUser

MSG = [{"role": "user", "content": "Hallo"}]


def test_a_string_and_an_account_object_both_name_the_user():
    assert ChatCompletionRequest(model="nova", messages=MSG, user="alice").user_id() == "alice"
    req = ChatCompletionRequest(model="nova", messages=MSG, user={
        "name": "Caroline", "id": "3f2a9c1e-8b7d", "email": "c@example.org", "role": "user"})
    assert isinstance(req.user, ClientUser) and (req.user_id(), req.user.name) == ("3f2a9c1e-8b7d", "Caroline")
    assert ChatCompletionRequest(model="nova", messages=MSG).user_id() is None


@pytest.mark.parametrize("user", ["bad id!", {"name": "Caroline"}, {"id": "bad id!"}, 7])
def test_a_user_that_names_no_valid_id_is_refused(user):
    with pytest.raises(ValidationError):
        ChatCompletionRequest(model="nova", messages=MSG, user=user)
