"""Bad inputs common to every command: the error contract of interp.cli (one line, exit 2, --debug)."""

import pytest

from tests.badinput import Case, cases_of, check_case, run_case

Case("cli-unknown-preset", item="11", argv=["train", "--preset", "nosuch", "--out", "runs/x"],
     message=r"interp train: .*nosuch")
Case("cli-unknown-command", item="new", argv=["trian"], message=r"invalid choice: 'trian'")
# interp figures --set FIELD=JSON: refused before any analysis runs (nothing under figures/ is written)
ONE_ANALYSIS = r"interp figures: --set: give it with --recompute and exactly one analysis"
GAIN = ["--recompute", "--only", "gain_vs_tokens"]
for name, args, message in [
        ("without-recompute", ["--set", "keep=false"], ONE_ANALYSIS + r" \(--only NAME\)"),
        ("two-analyses", ["--recompute", "--only", "gain_vs_tokens,schedules", "--set", "keep=false"], ONE_ANALYSIS),
        ("unknown-field", [*GAIN, "--set", "nosuch=1"], r"gain_vs_tokens.Config: --set nosuch: no such field; known"),
        ("not-json", [*GAIN, "--set", "seeds=many"], r"--set seeds='many' is not valid JSON .*seeds expects int"),
        ("wrong-type", [*GAIN, "--set", 'seeds="3"'], r"--set seeds=\"3\": expects int, got str")]:
    Case(f"cli-figures-set-{name}", item="new", argv=["figures", *args], message=message)


@pytest.mark.parametrize("case", cases_of("cli-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)


def test_debug_shows_the_traceback(tmp_path):
    case = next(c for c in cases_of("cli-unknown-preset"))
    for how in ({"argv": [*case.argv, "--debug"]}, {"env": {"INTERP_DEBUG": "1"}}):
        debug = Case(**{**case.__dict__, "id": f"debug-{len(how)}-{id(how)}", **how})
        outcome = run_case(debug, tmp_path / str(id(how)))
        assert outcome.rc == 2 and "Traceback (most recent call last)" in outcome.stderr
