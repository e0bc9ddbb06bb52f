"""The issue's newcomer one-liner, run exactly as a user would."""

import re
import subprocess
import sys

ONE_LINER = ("import dlbridge, numpy as np; "
             "t = dlbridge.from_dlpack(np.arange(6.).reshape(2,3)[:, ::-1]); "
             "print(t, np.from_dlpack(t))")


def test_one_liner_prints_the_reversed_view():
    result = subprocess.run([sys.executable, "-c", ONE_LINER], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    assert out.startswith("dlbridge.Tensor(shape=(2, 3), dtype=float64, device=cpu, strides=(3, -1)) ")
    # numpy's own printing of [[2, 1, 0], [5, 4, 3]]: the view, not a copy in another order.
    numbers = [float(n) for n in re.findall(r"\d+\.", out.split(") ", 1)[1])]
    assert numbers == [2.0, 1.0, 0.0, 5.0, 4.0, 3.0]
    assert out.rstrip().endswith("[[2. 1. 0.]\n [5. 4. 3.]]")
