"""``ember.distributed``: data-parallel backward over MPI (DESIGN §4 item 12).

The cases run in real MPI processes: ``mpiexec -n 2`` and ``-n 3`` start
``tests/distributed_worker.py`` once each (a few seconds), every rank runs every case and
writes its results to a file, and each ``test_under_mpiexec[n-case]`` below checks one case
on every rank; one more launch runs CUDA parameters on Numba's simulator.  They skip, saying
why, only when MPI cannot start on this machine (mpi4py or mpiexec missing, or a 2-rank probe
that fails); with ``EMBER_REQUIRE_MPI=1`` that is a failure instead.  The launcher is the
``mpiexec`` beside the interpreter (the ``mpich`` wheel's), else the one on ``PATH``;
``EMBER_MPIEXEC`` overrides it.  For a system Open MPI, e.g.
``EMBER_MPIEXEC=/usr/bin/mpiexec MPI4PY_LIBMPI=libmpi.so.40`` (Open MPI gets
``--oversubscribe``, and ``--allow-run-as-root`` as root).
"""
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import ember
import ember.distributed as dist

HERE = Path(__file__).parent
WORKER = HERE / "distributed_worker.py"
SIZES = (2, 3)
LAUNCH_TIMEOUT = 180      # seconds for one mpiexec run (a few when the kernel cache is warm)
REQUIRE = os.environ.get("EMBER_REQUIRE_MPI", "") not in ("", "0")


def _worker():
    spec = importlib.util.spec_from_file_location("ember_distributed_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_w = _worker()
NAMES, CUDA_CASES = _w.NAMES, _w.CUDA_CASES


# --- in this process: no MPI needed ------------------------------------------------------------
def test_import_does_not_load_mpi():
    code = "import sys, ember, ember.distributed; assert 'mpi4py' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_needs_init():
    assert not dist.is_initialized()
    w = ember.tensor([1.0, 2.0]).autodiff()
    with pytest.raises(dist.DistributedError, match=r"init\(\)"):
        w.set_distributed()
    with pytest.raises(dist.DistributedError, match=r"init\(\)"):
        dist.world_size()
    with pytest.raises(dist.DistributedError, match=r"init\(\)"):
        dist.all_reduce(w)
    assert not w.is_distributed() and not w.require_grad().is_distributed()
    assert issubclass(dist.DistributedTimeoutError, dist.DistributedError)
    assert issubclass(dist.DistributedError, RuntimeError)


def test_argument_errors_before_any_communication():
    with pytest.raises(ValueError, match="autodiff"):
        ember.tensor([1.0]).set_distributed()
    with pytest.raises(TypeError, match="Float"):
        ember.tensor([1]).autodiff().set_distributed()
    with pytest.raises(ValueError, match="op"):
        dist.init(op="max")
    with pytest.raises(ValueError, match="contradicts"):
        dist.init(op="mean", average=False)
    with pytest.raises(ValueError, match="op"):
        dist.all_reduce(ember.tensor([1.0]), op="min")
    assert not dist.is_initialized()


# --- under mpiexec -------------------------------------------------------------------------------
def _launcher():
    """The mpiexec command line (with the flags this MPI needs), or the reason there is none."""
    if importlib.util.find_spec("mpi4py") is None:
        return None, "mpi4py is not installed (pip install -e '.[distributed]')"
    if os.environ.get("EMBER_MPIEXEC"):
        cmd = shlex.split(os.environ["EMBER_MPIEXEC"])
    else:
        beside = Path(sys.executable).parent / "mpiexec"    # the mpich wheel's, in the venv
        found = str(beside) if beside.exists() else shutil.which("mpiexec") or shutil.which("mpirun")
        if not found:
            return None, "no mpiexec found (pip install -e '.[distributed]' brings MPICH's)"
        cmd = [found]
    try:
        version = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{cmd[0]} --version failed: {e}"
    if "Open MPI" in version.stdout + version.stderr or "OpenRTE" in version.stdout:
        cmd += ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return cmd, None


def _run(cmd, timeout, **extra_env):
    """Run ``cmd`` in its own process group; kill the whole group on timeout."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               **extra_env)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=HERE.parent, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out


def _unavailable(reason):
    if REQUIRE:
        pytest.fail(f"MPI is required (EMBER_REQUIRE_MPI=1) but cannot start: {reason}")
    pytest.skip(f"MPI cannot start on this machine: {reason}")


@pytest.fixture(scope="module")
def mpiexec():
    cmd, reason = _launcher()
    if cmd is None:
        _unavailable(reason)
    # rank 0 alone prints what it gathered: the ranks' output cannot interleave
    probe = ("from mpi4py import MPI; c = MPI.COMM_WORLD; ranks = c.gather(c.Get_rank()); "
             "c.Get_rank() or print('ranks', ranks, 'of', c.Get_size())")
    rc, out = _run(cmd + ["-n", "2", sys.executable, "-c", probe], timeout=60)
    if rc != 0 or "ranks [0, 1] of 2" not in out:
        _unavailable(f"'{shlex.join(cmd)} -n 2' did not start 2 ranks (exit {rc}): {out[-1500:]}")
    return cmd


_results = {}


@pytest.fixture(scope="module")
def results(mpiexec):
    """``results(n, cases=(), **env)``: ({rank: {case: record}}, launch summary) of one worker
    run on ``n`` ranks (each distinct run once)."""
    def get(n, cases=(), **env):
        key = (n, tuple(cases), tuple(sorted(env.items())))
        if key not in _results:
            with tempfile.TemporaryDirectory() as out_dir:
                rc, out = _run(mpiexec + ["-n", str(n), sys.executable, str(WORKER), out_dir, *cases],
                               timeout=LAUNCH_TIMEOUT, **env)
                per_rank = {}
                for r in range(n):
                    path = Path(out_dir) / f"rank{r}.jsonl"
                    lines = path.read_text().splitlines() if path.exists() else []
                    per_rank[r] = {d["case"]: d for d in map(json.loads, lines)}
            status = "timed out" if rc is None else f"exit {rc}"
            _results[key] = (per_rank, rc, f"mpiexec -n {n} {status}; output:\n{out[-3000:]}")
        return _results[key]
    return get


def _check(per_rank, rc, launch, n, case):
    for r in range(n):
        record = per_rank[r].get(case)
        assert record is not None, f"rank {r} did not report {case!r}; {launch}"
        assert record["ok"], f"rank {r} of {n}, case {case!r}:\n{record['error']}"
        if record["skipped"]:
            pytest.skip(record["skipped"])
    assert rc == 0, launch


@pytest.mark.parametrize("case", NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_under_mpiexec(results, n, case):
    _check(*results(n), n, case)


def test_cuda_gradients_under_simulator(results):
    """CUDA parameters (on Numba's simulator): host staging, and the CUDA-aware path."""
    _check(*results(2, CUDA_CASES, NUMBA_ENABLE_CUDASIM="1"), 2, "cuda_gradients")
