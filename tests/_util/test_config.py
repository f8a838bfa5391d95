"""interp._util.config: flags generated from config dataclasses, and `--set FIELD=JSON` overrides parsed and
type-checked against the field (issue 11, item 6: refused with the field's name and expected type)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from interp._util.config import add_arguments, coerce_to_type, dataclass_from_args, option, parse_set_overrides
from interp.widths import WidthSpec
from interp.training.config import parse_train_overrides


@dataclasses.dataclass
class Demo:
    tokens: int = option(16, "positions")
    backend: str = option("torch", "hook backend", choices=("torch", "nnsight"))
    prepend_bos: bool = option(False, "BOS first")
    metrics: tuple[str, ...] = option(("a", "b"), "metrics")
    dims: int | None = option(None, "dims")
    hidden: int = option(3, "not a flag", cli=False)


def test_flags_come_from_the_fields_and_defaults_stay_the_configs():
    parser = argparse.ArgumentParser()
    add_arguments(parser, Demo)
    flags = {a.dest for a in parser._actions if a.option_strings and a.dest != "help"}
    assert flags == {"tokens", "backend", "prepend_bos", "metrics", "dims"}  # cli=False stays out
    assert dataclass_from_args(Demo, parser.parse_args([])) == Demo()
    got = dataclass_from_args(Demo, parser.parse_args(["--tokens", "5", "--metrics", "x,y", "--prepend-bos"]))
    assert got == Demo(tokens=5, metrics=("x", "y"), prepend_bos=True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--backend", "tf"])  # choices enforced by argparse


@pytest.mark.parametrize("item, expected", [
    ("lr=1", {"lr": 1.0}),                                   # an int is a float
    ("betas=[0.9,0.99]", {"betas": (0.9, 0.99)}),            # a JSON list is the tuple field
    ("dtype=bf16", {"dtype": "bf16"}),                       # a bare string where the field takes a string
    ('dtype="bf16"', {"dtype": "bf16"}),
    ('mixer_options={"chunk_size": 64}', {"mixer_options": {"chunk_size": 64}}),
    ("start=1.25", {"start": 1.25}),                         # WidthSpec fields are accepted too
    ("seed=3", {"seed": 3}),
    ("tokenizer=smollm2", {"tokenizer": "smollm2"}),
])
def test_train_overrides_parse(item, expected):
    assert parse_train_overrides([item], "interp train") == expected


@pytest.mark.parametrize("item, message", [
    ("width=3", "--set width=3: expects WidthSpec, got int"),
    ('lr="0.1"', '--set lr="0.1": expects float, got str'),
    ("betas=[0.9", "--set betas='[0.9' is not valid JSON"),
    ("betas=[0.9]", "expects tuple[float, float] (2 items)"),
    ("steps=2.5", "--set steps=2.5: expects int, got float"),
    ("steps=true", "expects int, got bool"),
    ("bogus=1", "--set bogus: no such field"),
    ("noequals", "must look like FIELD=VALUE"),
])
def test_train_overrides_refused_with_field_and_type(item, message):
    with pytest.raises(ValueError, match=None) as err:
        parse_train_overrides([item], "interp train")
    assert message in str(err.value) and str(err.value).startswith("interp train: ")


def test_nested_dataclass_from_a_json_object():
    got = parse_train_overrides(['width={"schedule": "cosine", "start": 1.5, "end": 0.5}'], "x")
    assert got == {"width": WidthSpec("cosine", 1.5, 0.5)}
    with pytest.raises(ValueError, match="x: --set width"):
        parse_train_overrides(['width={"bogus": 1}'], "x")


def test_untyped_overrides_keep_the_old_behaviour():
    assert parse_set_overrides(["a=1", "b=[0.9"], "x") == {"a": 1, "b": "[0.9"}


def test_coerce_optional_and_any():
    assert coerce_to_type(None, int | None, "f") is None
    with pytest.raises(ValueError, match="null is not allowed"):
        coerce_to_type(None, int, "f")


def test_interp_train_cli_refuses_a_bad_set(capsys):
    from interp.cli import main

    assert main(["train", "--preset", "micro", "--out", "unused", "--set", "lr=\"0.1\""]) == 2
    err = capsys.readouterr().err
    assert "lr" in err and "expects float" in err and "Traceback" not in err
