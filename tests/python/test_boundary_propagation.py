"""An exception raised while dlbridge reads a producer's attribute is the
producer's to report: it propagates unchanged (as in NumPy), even
KeyboardInterrupt. Only an AttributeError means "not there"."""

import numpy as np
import pytest

import dlbridge


class Boom(Exception):
    pass


RAISED = [KeyboardInterrupt, Boom, ValueError, MemoryError]


def raising_property(name, exc):
    def get(self):
        raise exc("from the property")

    return type("Raising", (), {name: property(get)})()


@pytest.mark.parametrize("exc", RAISED, ids=lambda e: e.__name__)
@pytest.mark.parametrize("name", ["__array_interface__", "__cuda_array_interface__", "__dlpack__"])
def test_exception_inside_an_interface_property_propagates(name, exc):
    with pytest.raises(exc, match="from the property"):
        dlbridge.from_dlpack(raising_property(name, exc))
    with pytest.raises(exc, match="from the property"):
        dlbridge.to_dlpack(raising_property(name, exc))


@pytest.mark.parametrize("exc", RAISED, ids=lambda e: e.__name__)
def test_exception_inside_dlpack_device_property_propagates(exc):
    with pytest.raises(exc, match="from the property"):
        dlbridge.Device(raising_property("__dlpack_device__", exc))


def test_attribute_error_inside_a_property_means_absent():
    with pytest.raises(TypeError, match="has no __dlpack__"):
        dlbridge.from_dlpack(raising_property("__array_interface__", AttributeError))


def test_numpy_agrees_that_the_exception_propagates():
    with pytest.raises(Boom):
        np.asarray(raising_property("__array_interface__", Boom))
