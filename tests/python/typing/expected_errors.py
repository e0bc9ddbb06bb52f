# Checked by mypy (tests/python/test_typing.py), never run. Each line marked "# E: code" must
# be reported with that error code, and no other line may be.
import numpy

import dlbridge

a = numpy.ones(3, dtype=numpy.float32)

dlbridge.convert(a, "torch").nonexistent()  # E: attr-defined
dlbridge.convert(a, "jax").backward()  # E: attr-defined
dlbridge.convert(a, "numpy").numpy_nothing  # E: attr-defined
dlbridge.convert(a, "dlbridge").backward()  # E: attr-defined
dlbridge.convert(a, "torch", copy="no")  # E: call-overload
dlbridge.convert(a, "torch", stream=1)  # E: call-overload
dlbridge.plan_convert(a, "torch").nonexistent  # E: attr-defined
dlbridge.from_dlpack(a).backward()  # E: attr-defined
dlbridge.from_dlpack(a, copy=1)  # E: arg-type
n: int = dlbridge.convert(a, "torch")  # E: assignment
