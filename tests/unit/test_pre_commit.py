"""The published pre-commit hooks (`.pre-commit-hooks.yaml`): the manifest is valid, and
the `system` hook, run by pre-commit itself on a staged file, fails on a finding and
passes on clean code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(shutil.which("pre-commit", path=str(BIN)) is None, reason="pre-commit is not installed (dev extras)")


def pre_commit(*args, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PRE_COMMIT_HOME": str(home)}
    return subprocess.run([str(BIN / "pre-commit"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_manifest_is_valid(tmp_path):
    ran = pre_commit("validate-manifest", str(ROOT / ".pre-commit-hooks.yaml"), cwd=tmp_path, home=tmp_path / "home")
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_the_installed_hook_runs_check_on_staged_files(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / "old.py").write_text("import numpy as np\nx = np.float_(1)\n")
    (project / "new.py").write_text("import numpy as np\nx = np.float64(1)\n")
    subprocess.run(["git", "add", "old.py", "new.py"], cwd=project, check=True)
    home = tmp_path / "home"
    failed = pre_commit("try-repo", str(ROOT), "adaptrack-check-system", "--files", "old.py", "new.py", cwd=project, home=home)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "old.py:2:8: np.float_ does not exist in numpy" in failed.stdout
    assert "new.py:" not in failed.stdout
    passed = pre_commit("try-repo", str(ROOT), "adaptrack-check-system", "--files", "new.py", cwd=project, home=home)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout
