"""What an instance of a class has (apis/introspect_worker.instance_members), checked
against real instances: every public attribute a live instance shows is listed; classes
whose instances take any attribute say so with the "*" entry."""

from __future__ import annotations

import abc
import argparse
import collections
import concurrent.futures
import dataclasses
import json
import logging
import pathlib
import types

import numpy as np
import pytest

from adaptrack_lsp.apis import introspect_worker as worker


@dataclasses.dataclass
class _Point:
    x: int
    y: int = 0


class _Fitted:
    def __init__(self):
        self.alpha = 1.0

    def fit(self):
        self.coef_ = [1.0]
        return self


class _Proxy:
    def __getattr__(self, name):
        return 42


class _Dynamic:
    def __init__(self, **fields):
        for key, value in fields.items():
            setattr(self, key, value)


def _fill(target, value):
    target.filled = value


class _FilledElsewhere:
    """Attributes set by a module function it is handed to, and on an instance a
    classmethod makes (the shape of `Vocabulary.from_strings`)."""

    def __init__(self, callback=None):
        _fill(self, 1)
        if callback is not None:
            callback(self)  # a callback: reads it

    @classmethod
    def named(cls, names):
        made = cls()
        made.names = list(names)
        return made


class _Base(abc.ABC):
    @abc.abstractmethod
    def run(self): ...


class _Concrete(_Base):
    def __init__(self):
        self.model = object()

    def run(self):
        return self.model



class _Leaf(_Fitted):
    """A class with no methods of its own (scipy's ``csr_matrix``: a docstring and bases)."""


class _Copier:
    """Sets a computed name, but only on an object it makes itself (pandas'
    ``DataFrame.to_timestamp``)."""

    def __init__(self, other=None):
        self.data = other

    def renamed(self, name):
        new = _Copier()
        setattr(new, name, 1)
        return new


class _HandsItself:
    def __init__(self):
        self.kept = _Copier(self)


def _names_of(*objects):
    return [type(item).__name__ for item in objects]


def _tag_all(*objects):
    for item in objects:
        item.tagged = True


class _ReadByVarargs:
    def __init__(self):
        self.names = _names_of(self)


class _TaggedByVarargs:
    def __init__(self):
        _tag_all(self)

INSTANCES = [
    lambda: np.zeros(3),
    lambda: np.zeros((2, 2)).view(np.matrix),
    lambda: np.random.default_rng(0),
    lambda: json.JSONDecoder(),
    lambda: argparse.ArgumentParser(prog="x"),
    lambda: logging.getLogger("adaptrack-test"),
    lambda: pathlib.Path("a/b"),
    lambda: concurrent.futures.ThreadPoolExecutor(1),
    lambda: _Point(1),
    lambda: _Fitted().fit(),
    lambda: _FilledElsewhere.named(["a"]),
]


@pytest.mark.parametrize("make", INSTANCES)
def test_every_public_attribute_of_a_live_instance_is_listed(make):
    instance = make()
    members = worker.instance_members(type(instance))
    live = {name for name in dir(instance) if not name.startswith("_")}
    assert live <= set(members), sorted(live - set(members))


def test_closed_classes_list_no_wildcard_and_removed_methods_are_absent():
    ndarray = worker.instance_members(np.ndarray)
    assert worker.ANY_ATTRIBUTE not in ndarray
    assert {"sum", "reshape", "T", "shape"} <= set(ndarray)
    for removed in ("ptp", "itemset", "newbyteorder"):  # removed from ndarray in NumPy 2.0
        assert (removed in ndarray) == hasattr(np.zeros(1), removed)
    assert ndarray["sum"] == ("function", False)
    fitted = worker.instance_members(_Fitted)
    assert {"alpha", "coef_", "fit"} <= set(fitted) and worker.ANY_ATTRIBUTE not in fitted


def test_classes_whose_instances_take_any_attribute_say_so():
    assert worker.instance_members(_Proxy)[worker.ANY_ATTRIBUTE] == ("any", False)
    assert worker.instance_members(_Dynamic)[worker.ANY_ATTRIBUTE] == ("any", False)
    assert worker.instance_members(argparse.Namespace)[worker.ANY_ATTRIBUTE] == ("any", False)
    # a C class with a __dict__ and no Python twin whose source says what is set
    assert worker.instance_members(types.SimpleNamespace)[worker.ANY_ATTRIBUTE] == ("any", False)


def test_members_of_a_path_ending_in_a_call_are_the_instance_members_of_its_type():
    answer = worker.handle({"id": 1, "op": "members", "path": ["json", "JSONDecoder", "()"], "signatures": True})
    assert answer["type"] == "json.decoder.JSONDecoder"
    assert "decode" in answer["members"] and "memo" in answer["members"]
    assert answer["signatures"]["decode"] == ["s", "_w"]  # self dropped
    answer = worker.handle({"id": 2, "op": "members", "path": ["numpy", "ndarray", "()"], "signatures": True})
    # its text signature takes **kwargs; the docstring's signature line names them
    assert answer["signatures"]["sum"] == ["axis", "dtype", "out", "*", "keepdims", "initial", "where"]
    # a C function without annotations: its numpydoc "Returns" section names the type
    answer = worker.handle({"id": 3, "op": "members", "path": ["numpy", "zeros", "()"]})
    assert answer["type"] == "numpy.ndarray" and type(np.zeros(3)).__name__ == "ndarray"
    # several values documented (linspace's optional step): not known
    answer = worker.handle({"id": 4, "op": "members", "path": ["numpy", "linspace", "()"]})
    assert answer["members"] is None and "not known" in answer["error"]


@pytest.mark.parametrize(
    "function, expected",
    [
        (np.zeros, np.ndarray),  # numpydoc "out : ndarray"
        (np.arange, np.ndarray),
        (np.random.default_rng, np.random.Generator),  # return annotation
        (np.linspace, None),  # two values documented (retstep)
        (json.loads, None),  # nothing said
        (np.histogram, None),
    ],
)
def test_the_result_class_agrees_with_calling_the_function(function, expected):
    assert worker.result_class(function) is expected
    if function is np.zeros:
        assert type(function(3)) is expected  # the reference: calling it
    if function is np.random.default_rng:
        assert type(function(0)) is expected


def test_a_method_signature_through_an_instance_drops_self_for_c_and_python_methods():
    assert worker.handle({"id": 1, "op": "signature", "path": ["numpy", "ndarray", "()", "sum"]})["signature"][0] == "axis"
    assert worker.handle({"id": 2, "op": "signature", "path": ["json", "JSONDecoder", "()", "decode"]})["signature"] == ["s", "_w"]


def test_attributes_set_outside_the_class_body_are_seen():
    """Found in NumPy's and this project's tests: `np.finfo(x).eps` (set by a C function
    the class hands itself to), `Vocabulary.from_strings(...).names` (set on the instance
    a classmethod makes), an abstract return type whose objects are subclasses."""
    assert hasattr(np.finfo(np.float64), "eps") and "eps" not in dir(np.finfo)
    assert worker.instance_members(np.finfo)[worker.ANY_ATTRIBUTE] == ("any", False)
    filled = worker.instance_members(_FilledElsewhere)
    assert {"filled", "names"} <= set(filled) and worker.ANY_ATTRIBUTE not in filled  # a callback sets nothing
    assert worker.instance_members(_Base)[worker.ANY_ATTRIBUTE] == ("any", False)
    concrete = worker.instance_members(_Concrete)
    assert "model" in concrete and worker.ANY_ATTRIBUTE not in concrete
    for closed in (np.iinfo, json.JSONDecoder, argparse.ArgumentParser):  # still checked
        assert worker.ANY_ATTRIBUTE not in worker.instance_members(closed), closed


def test_c_classes_are_closed_where_their_lookup_is_generic_or_their_python_twin_says_so():
    """``datetime.date``, ``array.array`` and ``ElementTree.Element`` name a C
    ``__getattribute__`` that is the generic lookup; ``OrderedDict`` keeps a ``__dict__``
    that its pure-Python twin in ``collections`` says nothing dynamic fills; io's file
    objects keep data (``open()`` sets ``mode``) that may be read but not called."""
    import array
    import datetime
    import io
    import xml.etree.ElementTree as ET

    for cls, instance, removed in (
        (datetime.date, datetime.date.today(), "iso"),
        (array.array, array.array("b"), "fromstring"),
        (ET.Element, ET.Element("a"), "getiterator"),
        (collections.OrderedDict, collections.OrderedDict(), "iteritems"),
    ):
        members = worker.instance_members(cls)
        assert worker.ANY_ATTRIBUTE not in members, cls
        assert {n for n in dir(instance) if not n.startswith("_")} <= set(members), cls
        assert not hasattr(instance, removed) and removed not in members  # the reference: the instance lacks it
    with open(__file__) as handle:
        assert isinstance(handle, io.TextIOWrapper) and handle.mode == "r" and "mode" not in dir(io.TextIOWrapper)
    assert worker.instance_members(io.TextIOWrapper)[worker.ANY_ATTRIBUTE] == ("values", False)


def test_what_sets_nothing_on_an_instance_leaves_it_closed():
    """A class without methods of its own, an object handed to a class that sets computed
    names only on objects it makes, and to a ``*args`` function that only reads it: each
    instance lacks a name its classes do not give (the reference: reading it raises)."""
    for cls in (_Leaf, _HandsItself, _ReadByVarargs):
        instance = cls()
        with pytest.raises(AttributeError):
            instance.missing  # noqa: B018 - the reference: the attribute does not exist
        members = worker.instance_members(cls)
        assert worker.ANY_ATTRIBUTE not in members, cls
        assert {n for n in dir(instance) if not n.startswith("_")} <= set(members), cls
    assert "alpha" in worker.instance_members(_Leaf)  # the base's attributes are still read
    # a *args function that writes attributes: its objects may have any
    assert _TaggedByVarargs().tagged is True and "tagged" not in vars(_TaggedByVarargs)
    assert worker.instance_members(_TaggedByVarargs)[worker.ANY_ATTRIBUTE] == ("any", False)
    # configparser's ConverterMapping sets computed names on the parser it keeps
    import configparser

    parser = configparser.ConfigParser(converters={"decimal": float})
    assert hasattr(parser, "getdecimal") and not hasattr(configparser.ConfigParser, "getdecimal")
    assert worker._sets_computed_names(configparser.ConverterMapping)
    assert not worker._sets_computed_names(_Copier)


def test_c_class_constructors_take_the_parameters_their_python_twin_declares():
    """``ET.XMLParser(html=0)`` (removed in Python 3.8): the C class has no signature;
    its pure-Python twin's ``__init__`` names the parameters.  The reference: calling the
    C class with every named parameter works, and with another keyword raises."""
    import datetime
    import xml.etree.ElementTree as ET

    cases = [
        (ET.XMLParser, {"target": None, "encoding": None}),
        (ET.TreeBuilder, {"element_factory": None, "comment_factory": None, "pi_factory": None, "insert_comments": False, "insert_pis": False}),
        (datetime.date, {"year": 2020, "month": 1, "day": 2}),
        (datetime.timedelta, {"days": 1, "seconds": 1, "microseconds": 1, "milliseconds": 1, "minutes": 1, "hours": 1, "weeks": 1}),
    ]
    for cls, keywords in cases:
        items = worker.signature_of(cls)
        assert items is not None and not any(item.startswith("**") for item in items), cls
        assert {item for item in items if item not in ("/", "*")} == set(keywords), cls
        cls(**keywords)
        with pytest.raises(TypeError):
            cls(**keywords, html=0)
