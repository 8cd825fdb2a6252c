"""The built wheel, installed without the checkout: the SQL ships and ``db init`` works."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from helpers import REPO


#: They build from the checkout: one worker builds at a time.
pytestmark = pytest.mark.xdist_group("build")

ROOT = REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    # From a clean copy, as `package stage` builds: setuptools builds in the tree's build/,
    # which an earlier or interrupted build may have left behind.
    source = tmp_path_factory.mktemp("source") / "checkout"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "venv", "build", "dist", "*.egg-info", "__pycache__",
        ".pytest_cache", ".hypothesis", "*.fpkg", "fpkg-stage"))
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(out), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]     # pip says why
    return next(out.glob("fme_ai_resilience-*.whl"))


def test_the_tests_that_build_share_one_worker(request):
    """Under ``--dist loadgroup`` (setup.cfg) the tests marked ``xdist_group("build")`` run on
    one worker, which builds the wheels and the FME Package once and never two at a time in
    the checkout. xdist groups them by a suffix it adds to their node ids; pytest 9.2's node
    ids no longer take it (pytest-xdist#1386), and then every worker builds again."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not on pytest-xdist's workers under --dist loadgroup")
    assert request.node.nodeid.endswith("@build"), (
        f"pytest-xdist did not group {request.node.nodeid} on pytest {pytest.__version__}: "
        "install a pytest it groups on (setup.cfg's test extra)")

def test_the_wheel_carries_every_sql_file(wheel):
    """Each .sql file of sql/ is in the wheel, inside the package."""
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in (ROOT / "sql").glob("*.sql"):
        assert f"fme_ai_resilience/store/sql/{path.name}" in names


def test_the_wheel_carries_the_workspace_templates(wheel):
    """Each template's script and .fmw, of both shapes, is in the wheel (the drill's engines
    run WS-02's; the FME 2023/2024 ones are in fme2023-2024/)."""
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = sorted(p.relative_to(ROOT / "workspaces").as_posix()
                     for p in (ROOT / "workspaces").rglob("WS-*"))
    assert len(shipped) == 12
    for name in shipped:
        assert f"fme_ai_resilience/workspaces/{name}" in names


def test_db_init_runs_from_the_installed_wheel(wheel, tmp_path):
    """``db init`` on SQLite from a plain (not editable) install, away from the checkout."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(target))
    db = tmp_path / "ledger.db"
    where = subprocess.run([sys.executable, "-c", "import fme_ai_resilience as f; "
                            "print(f.__file__)"], cwd=tmp_path, env=env, text=True,
                           capture_output=True, check=True).stdout
    assert where.startswith(str(target))
    done = subprocess.run([sys.executable, "-m", "fme_ai_resilience", "db", "init", "--db",
                           f"sqlite:///{db}"], cwd=tmp_path, env=env, text=True,
                          capture_output=True)
    assert done.returncode == 0, done.stderr
    assert "schema version 0 ->" in done.stdout
    assert db.exists()


def test_the_drill_stand_ins_run_from_the_installed_wheel(wheel, tmp_path):
    """The stand-ins ship in the wheel: the Vision AI stand-in answers from a plain install."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(target))
    script = (
        "import http.client, json\n"
        "from fme_ai_resilience.drill.standins import VisionStandIn, PhotoHost\n"
        "with PhotoHost() as photos, VisionStandIn() as vision:\n"
        "    photos.add('a.jpg')\n"
        "    conn = http.client.HTTPConnection('127.0.0.1', vision.port, timeout=5)\n"
        "    conn.request('POST', '/analyze', photos.data('a.jpg'),\n"
        "                 {'Content-Type': 'application/octet-stream'})\n"
        "    answer = json.loads(conn.getresponse().read())\n"
        "    print(answer['condition'] == vision.truth(photos.data('a.jpg'))[0])\n"
        "import fme_ai_resilience\n"
        "print(fme_ai_resilience.__file__)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, text=True,
                          capture_output=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "True"
    assert done.stdout.splitlines()[1].startswith(str(target))


def test_the_pytest_plugin_loads_from_the_installed_wheel(wheel, tmp_path):
    """A plain install, without responses: pytest finds the plugin through its entry point,
    an FME author's test gets the fixtures and run_caller, and fake_vision is skipped with a
    reason instead of breaking the plugin."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    shadow = tmp_path / "shadow" / "responses"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("responses is not installed")\n')
    work = tmp_path / "author"
    work.mkdir()
    (work / "test_author.py").write_text(
        "import os\n"
        "import fme_ai_resilience.testing.plugin as plugin\n"
        "from fme_ai_resilience.testing import run_caller\n\n"
        "class Echo:\n"
        "    def input(self, feature):\n"
        "        import fme\n"
        "        feature.setAttribute('db', fme.macroValues['FAIR_DB'])\n"
        "        self.pyoutput(feature)\n\n"
        "    def close(self):\n"
        "        pass\n\n"
        "def test_from_the_wheel(fair_db, fake_clock):\n"
        "    assert plugin.__file__.startswith(os.environ['FAIR_TEST_SITE'])\n"
        "    run = run_caller(Echo, [{}], {'FAIR_DB': fair_db}, clock=fake_clock)\n"
        "    assert run.output[0].getAttribute('db') == fair_db\n\n"
        "def test_fake_fme(fake_fme, fme_macros):\n"
        "    fme_macros['X'] = '1'\n"
        "    import fme\n"
        "    assert fme.macroValues == {'X': '1'}\n\n"
        "def test_vision(fake_vision):\n"
        "    raise AssertionError('responses is shadowed: this must be skipped')\n")
    env = dict(os.environ, PYTHONPATH=f"{target}{os.pathsep}{shadow.parent}",
               FAIR_TEST_SITE=str(target))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rs", "test_author.py"], cwd=work, env=env, text=True,
                          capture_output=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 1 skipped" in done.stdout
    assert "fake_vision needs responses" in done.stdout
