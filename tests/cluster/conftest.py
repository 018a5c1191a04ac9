"""The cluster tier: clusters of local Ray processes (`ray.cluster_utils.Cluster`) beside the
session's stores."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

GCS_WAIT_S = "120"
"""How long a head waits for its GCS to publish its port. Ray's own default is 30 s; on two shared
cores, right after the tiers before this one have torn their clusters down, the GCS has taken
longer than that to come up."""


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError as e:
        return f"({e})"


def startup_report() -> str:
    """What a failed head start leaves to read: the newest session's GCS and raylet logs and the
    Ray processes still running on the machine."""
    root = Path(tempfile.gettempdir()) / "ray"
    sessions = sorted(root.glob("session_2*"), key=lambda p: p.stat().st_mtime)
    parts = []
    if sessions:
        logs = sessions[-1] / "logs"
        for name in ("gcs_server.out", "gcs_server.err", "raylet.out", "raylet.err"):
            parts.append(f"--- {logs / name}\n{_tail(logs / name)}")
    ps = subprocess.run(["ps", "-eo", "pid,etimes,pcpu,args"], capture_output=True, text=True).stdout
    parts.append("--- ray processes\n" + "\n".join(
        line[:200] for line in ps.splitlines() if any(k in line for k in ("gcs_server", "raylet", "ray::"))))
    return "\n".join(parts)


HEAD_STARTS = 2
"""Attempts at a head. On these two cores a head has now and then not come up at all right after
the tiers before this one (Ray's "The current node timed out during startup", no GCS or raylet
left running); every failed attempt is printed with `startup_report()`, and a second one is made."""


def local_cluster(**head_args):
    """A local cluster's head (`connect=False`: the test attaches through the product's own path).
    When the head does not come up, the error carries `startup_report()`."""
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", GCS_WAIT_S)
    for attempt in range(1, HEAD_STARTS + 1):
        try:
            return Cluster(initialize_head=True, connect=False, head_node_args=head_args)
        except Exception as e:
            report = f"the local cluster's head did not start (attempt {attempt} of {HEAD_STARTS}): {e}\n{startup_report()}"
            if attempt == HEAD_STARTS:
                raise RuntimeError(report) from e
            print(report, file=sys.stderr)
