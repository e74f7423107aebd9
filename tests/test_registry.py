"""The generic registry: duplicates, "did you mean", patterns."""

from __future__ import annotations

import pytest

from dmlbench.errors import Registry, RegistryError


def test_register_get_list() -> None:
    reg: Registry[int] = Registry("thing")
    reg.register("proxy-nca")(1)
    reg.add("proxy-softmax", 2)
    reg.add("lifted", 3)
    assert reg.get("lifted") == 3
    assert reg.list("*proxy*") == ["proxy-nca", "proxy-softmax"]
    assert list(reg) == ["lifted", "proxy-nca", "proxy-softmax"] and len(reg) == 3


def test_unknown_name_suggests() -> None:
    reg: Registry[int] = Registry("method")
    reg.add("multi-similarity", 1)
    with pytest.raises(RegistryError, match=r"unknown method 'multi-similarty' .*did you mean"):
        reg.get("multi-similarty")


def test_duplicate_name_is_a_bug() -> None:
    reg: Registry[int] = Registry("method")
    reg.add("a", 1)
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("a", 2)
