"""Time from the last rank blocking to dsdoctor's finding, for each failure class of a real PyTorch
job (tests/e2e/programs/torch_train.py, 2 simulated nodes x 1 rank, gloo, torch's own timeout
120 s). The blocking moment is the newest start of a call in flight in the report (the trace's
clock); the finding's moment is the first tick of the run's events.jsonl that carries it.

    /usr/bin/python3 bench/torch_time_to_finding.py [ROUNDS=3]
    TORCH_PYTHON=.deps/torch2-venv/bin/python /usr/bin/python3 bench/torch_time_to_finding.py 3   # torch 2.15
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = os.path.abspath(os.environ.get("TORCH_PYTHON", "/usr/bin/python3"))  # the ranks' interpreter (its torch)
SCENARIOS = [("ckpt_rank0", "COLLECTIVE_MISMATCH"), ("size_mismatch", "COLLECTIVE_MISMATCH"), ("uneven", "COLLECTIVE_MISMATCH"),
             ("p2p_deadlock", "P2P_DEADLOCK"), ("world_size", "RANK_MISSING")]
# A rank stuck outside any collective (loader_stuck) is a suspicion by design: it is named as a
# warning once the others waited --hang-after seconds (default 5), and never stops the job.


def one(scenario, code):
    d = tempfile.mkdtemp(prefix="dsd-ttf-")
    env = dict(os.environ, SCENARIO=scenario, STEP_TIMEOUT="120",
               DSDOCTOR_PY_SPY=os.path.join(ROOT, ".deps/py-spy-0.4.3/py-spy"))
    subprocess.run([os.path.join(ROOT, "build/bin/dsdoctor"), "run", "--local", "2", "--slots", "1", "--quiet", "--log-dir", d,
                    "--json", d + "/report.json", "--", PYTHON, os.path.join(ROOT, "tests/e2e/programs/torch_train.py")],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    start_ms, found = None, None
    with open(d + "/events.jsonl") as f:
        for line in f:
            ev = json.loads(line)
            if ev["type"] == "header":
                start_ms = ev["start_unix_ms"]
            elif ev["type"] == "tick" and found is None and any(x["code"] == code for x in ev.get("findings", [])):
                found = start_ms / 1e3 + ev["t"]
    with open(d + "/run.json") as f:
        ranks = json.load(f)["ranks"]
    blocked = max((r["in_flight"]["started_ns"] for r in ranks if "in_flight" in r), default=0) / 1e9
    frd = os.path.join(d, "flight_recorder")
    dumps = sum(len(fs) for p, _, fs in os.walk(frd) if os.path.basename(p).startswith("incident-"))
    return (found - blocked if found and blocked else float("nan")), dumps


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
for scenario, code in SCENARIOS:
    runs = [one(scenario, code) for _ in range(rounds)]
    times = [t for t, _ in runs]
    print("%-14s %-20s median %.2f s (%s); Flight Recorder dumps per run: %s" % (
        scenario, code, statistics.median(times), ", ".join("%.2f" % t for t in times), ", ".join(str(n) for _, n in runs)))
