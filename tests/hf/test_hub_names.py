"""Names from a hub or a user are input (issue #47): revision names, commit ids and revision specs are checked against
the hub's grammar before any path is built, and a spec is counted before it is expanded. Fast: no server, no model.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interp._util.errors import InputError
from interp._util.net import HubStalled, bounded, hub_timeout, is_network_error
from interp.hf import hub

REAL_NAMES = ["main", "step0", "step143000", "stage1-step140000-tokens294B", "step_000128", "v1.0", "refs/pr/1",
              "step-001000-2BT", "intermediate-checkpoints/step-100", "a" * 255,
              "0123456789abcdef0123456789abcdef01234567"]
HOSTILE = ["", "..", "../x", "a/../b", "/etc/passwd", "a/", "a//b", ".hidden", "a/.b", "x.lock", "a b", "a\nb",
           "a~1", "a^", "a:b", "a?", "a*", "a[", "a\\b", "@", "a@{1}", "a.", "a" * 256, "\x00", "../../../../victim.txt"]


@pytest.mark.parametrize("name", REAL_NAMES)
def test_the_names_real_series_use_are_revision_names(name):
    assert hub.is_revision_name(name)


@pytest.mark.parametrize("name", HOSTILE)
def test_names_that_could_leave_the_cache_are_not(name):
    assert not hub.is_revision_name(name)
    with pytest.raises(InputError, match="is not a revision name"):
        hub.check_revision(name)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=40))
def test_a_revision_name_never_climbs_out_of_the_folder_it_names(name):
    if hub.is_revision_name(name):
        parts = PurePosixPath(name).parts
        assert not PurePosixPath(name).is_absolute() and ".." not in parts and "." not in name.split("/")
        assert "\x00" not in name and "\n" not in name


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="step_0123456789.,:a/ ", max_size=40))
def test_any_revisions_spec_is_names_or_one_error(spec):
    try:
        names = hub.parse_revisions(spec)
    except InputError as err:
        assert "--revisions" in str(err)
        return
    assert names is None or (0 < len(names) <= hub.MAX_REVISIONS and all(map(hub.is_revision_name, names)))


def test_a_range_is_counted_before_it_is_built_and_keeps_its_zero_padding():
    with pytest.raises(InputError, match="names 1,000,000,000,000 revisions"):
        hub.parse_revisions("step0..step999999999999:1")
    assert hub.parse_revisions("step_000000..step_000128:64") == ["step_000000", "step_000064", "step_000128"]
    assert hub.parse_revisions("step0..step2000:1000") == ["step0", "step1000", "step2000"]
    assert hub.parse_revisions("step_000000..step_000128:64,main")[-1] == "main"
    for bad in ("step0..step10:0", "step0..step10:000", "step0..step10:", "step5..step1"):
        with pytest.raises(InputError, match="is not a range"):
            hub.parse_revisions(bad)


def test_the_flag_a_user_gave_is_the_one_named():
    with pytest.raises(InputError, match=r"^--revision: 'a b'"):
        hub.parse_revisions("a b", field="--revision")


def test_the_deadline_variable_is_checked(monkeypatch):
    monkeypatch.delenv("INTERP_HUB_TIMEOUT", raising=False)
    assert hub_timeout() == 60
    monkeypatch.setenv("INTERP_HUB_TIMEOUT", "2.5")
    assert hub_timeout() == 2.5
    for bad in ("0", "-1", "soon", "nan", "inf"):
        monkeypatch.setenv("INTERP_HUB_TIMEOUT", bad)
        with pytest.raises(InputError, match="INTERP_HUB_TIMEOUT"):
            hub_timeout()


def test_bounded_gives_up_on_a_call_that_never_returns_and_passes_errors_through(monkeypatch):
    import threading

    monkeypatch.setenv("INTERP_HUB_TIMEOUT", "0.2")
    never = threading.Event()
    with pytest.raises(HubStalled, match=r"INTERP_HUB_TIMEOUT: the hub at .* did not answer the test call within "
                                         r"0\.2 s"):
        bounded(never.wait, "the test call")
    never.set()
    assert bounded(lambda: 42, "a quick call") == 42
    with pytest.raises(KeyError):
        bounded(lambda: {}["x"], "a failing call")


def test_what_counts_as_a_network_failure():
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    assert is_network_error(httpx2.ConnectError("refused")) and is_network_error(ConnectionResetError())
    assert is_network_error(HubStalled("stalled"))
    assert not is_network_error(KeyError("x")) and not is_network_error(ValueError("x"))
    # an answer of the hub is an httpx error (and an OSError) too: callers tell it apart first (hub.is_hub_answer)
    answer = HfHubHTTPError("500", response=httpx2.Response(500, request=httpx2.Request("GET", "http://hub/api")))
    assert hub.is_hub_answer(answer) and not hub.is_hub_answer(httpx2.ConnectError("refused"))
