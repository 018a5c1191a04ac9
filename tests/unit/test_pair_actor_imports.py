"""The pair actor's code path imports no heavy library (they live in the shared deployments)."""
import subprocess
import sys


def test_chain_modules_import_nothing_heavy():
    code = (
        "import sys\n"
        "import actors.pair\n"
        "from pipeline.runner import ChainRunner\n"
        "from pipeline.chains import CHARACTER_CHAIN, HUMAN_CHAIN\n"
        "ChainRunner(CHARACTER_CHAIN); ChainRunner(HUMAN_CHAIN)\n"
        "import pipeline.agents, pipeline.plugins\n"
        "pipeline.agents.registry(); pipeline.plugins.PLUGINS\n"
        "print(','.join(m for m in actors.pair.HEAVY_MODULES if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
