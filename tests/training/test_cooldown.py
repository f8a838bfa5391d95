"""Warmup-stable-decay schedules and cooldown branches (interp.training.cooldown).

The contract under test: a branch of length S is bit-identical to the run `--steps S --lr-schedule wsd`, the main
run is bit-identical to one trained without branches, and kills/signals inside a branch lose nothing.
"""

import dataclasses
import math

import pytest
import torch

from interp._util.paths import RESULT_FILE
from interp.cli import build_parser
from interp.cli.train import config_from_args
from interp.training import TrainConfig, cooldown, lr_at
from interp.training.config import decay_start
from interp.training.runtime import StopFlag
from tests.training.test_train import micro, read_log, run, weights

WSD = dict(steps=12, warmup_steps=2, lr_schedule="wsd", cooldown_fraction=0.5, eval_interval=6, ckpt_interval=2)


def test_wsd_lr_is_flat_then_one_minus_sqrt():
    cfg = TrainConfig(steps=100, warmup_steps=10, lr=1e-3, min_lr=1e-4, lr_schedule="wsd", cooldown_fraction=0.2)
    assert decay_start(100, cfg) == 80 and decay_start(50, cfg) == 40
    assert [lr_at(s, cfg) for s in (10, 50, 79)] == [1e-3] * 3
    assert lr_at(99, cfg) == pytest.approx(1e-4)  # min_lr at the last step
    assert lr_at(89, cfg) == pytest.approx(1e-4 + 9e-4 * (1 - math.sqrt(10 / 20)))
    # the stable phase does not depend on the horizon: a 50-step branch shares steps 0..39 with the run
    assert all(lr_at(s, cfg, steps=50) == lr_at(s, cfg) for s in range(40))
    assert lr_at(45, cfg, steps=50) < lr_at(45, cfg)
    cosine = TrainConfig(steps=100, warmup_steps=10, lr=1e-3, min_lr=1e-4)  # the default schedule is unchanged
    assert lr_at(54, cosine) == pytest.approx(1e-4 + 0.5 * 9e-4 * (1 + math.cos(math.pi * 44 / 89)))


def test_branches_equal_runs_of_their_own_length(env, tmp_path):
    main = run(env, micro(env, tmp_path / "main", cooldowns=(6, 9), **WSD))
    plain = run(env, micro(env, tmp_path / "plain", **WSD))
    # the main run is untouched by its branches: same weights, same final loss as a run without them
    wm, wp = weights(tmp_path / "main"), weights(tmp_path / "plain")
    assert all(torch.equal(wm[k], wp[k]) for k in wm) and main["val_loss"] == plain["val_loss"]
    assert [c["step"] for c in main["cooldowns"]] == [6, 9]
    for length in (6, 9):
        own = run(env, micro(env, tmp_path / f"own{length}", **{**WSD, "steps": length}))
        branch = cooldown.branch_result(tmp_path / "main", length)
        assert branch["val_loss"] == own["val_loss"] and branch["tokens"] == own["tokens"]
        assert branch["branched_at"] == decay_start(length, micro(env, tmp_path, **WSD))
        wb, wo = weights(cooldown.branch_dir(tmp_path / "main", length)), weights(tmp_path / f"own{length}")
        assert all(torch.equal(wb[k], wo[k]) for k in wb)
    logged = [r for r in read_log(tmp_path / "main") if r["kind"] == "cooldown"]
    assert [r["length"] for r in logged] == [6, 9] and [r["step"] for r in logged] == [3, 5]


def test_resume_and_signal_inside_a_branch_lose_nothing(env, tmp_path, monkeypatch):
    straight = run(env, micro(env, tmp_path / "straight", cooldowns=(6, 9), **WSD))
    cfg = micro(env, tmp_path / "split", cooldowns=(6, 9), **WSD)
    half = run(env, cfg, stop_at=4)  # after the 6-step branch (at step 3), before the 9-step one (at 5)
    assert half["status"] == "interrupted" and cooldown.branch_result(tmp_path / "split", 6) is not None
    # a SIGTERM inside the 9-step branch: the branch is abandoned, the run saves at the branch point and stops
    flags: list[StopFlag] = []
    monkeypatch.setattr(StopFlag, "__enter__", lambda self: flags.append(self) or self)
    from interp.training.trainer import Trainer

    def step_and_signal(self, batch, step, lr=None):
        if lr is not None:
            flags[-1].signal = "SIGTERM"
        return original_step(self, batch, step, lr)

    original_step = Trainer.train_step
    monkeypatch.setattr(Trainer, "train_step", step_and_signal)
    stopped = run(env, cfg.with_overrides(resume=True))
    assert stopped["status"] == "interrupted" and stopped["step"] == 5
    assert cooldown.branch_result(tmp_path / "split", 9) is None
    monkeypatch.undo()
    done = run(env, cfg.with_overrides(resume=True))
    assert done["status"] == "done" and done["val_loss"] == straight["val_loss"]
    assert [c["val_loss"] for c in done["cooldowns"]] == [c["val_loss"] for c in straight["cooldowns"]]
    ws, wd = weights(tmp_path / "straight"), weights(tmp_path / "split")
    assert all(torch.equal(ws[k], wd[k]) for k in ws)
    assert (cooldown.branch_dir(tmp_path / "split", 9) / RESULT_FILE).is_file()


@pytest.mark.parametrize("overrides, message", [
    (dict(cooldowns=(4,)), "needs --lr-schedule wsd"),
    (dict(lr_schedule="wsd", cooldowns=(12,)), "must be an int in"),
    (dict(lr_schedule="wsd", cooldowns=(3,), warmup_steps=3), "inside the 3-step warm-up"),
    (dict(lr_schedule="wsd", cooldowns=(4, 4)), "listed twice"),
    (dict(lr_schedule="wsd", cooldowns=(4,), parallel="fsdp"), "not supported with --parallel fsdp"),
    (dict(lr_schedule="wsd", cooldown_fraction=0.0), "must be in \\(0, 1\\]"),
    (dict(lr_schedule="step"), "choose one of"),
])
def test_bad_schedules_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{"steps": 12, "warmup_steps": 1, **overrides}).validate()


def test_cli_flags(tmp_path):
    args = build_parser().parse_args(["train", "--preset", "micro", "--lr-schedule", "wsd", "--cooldowns", "4,6",
                                      "--cooldown-fraction", "0.25", "--out", str(tmp_path / "r")])
    cfg = config_from_args(args)
    assert (cfg.lr_schedule, cfg.cooldowns, cfg.cooldown_fraction) == ("wsd", (4, 6), 0.25)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg  # stored as a list, read back as a tuple


@pytest.mark.integration  # one torchrun launch of 2 gloo ranks (~10 s)
def test_branches_under_ddp_match_one_process(env, tmp_path):
    """`torchrun --nproc_per_node=2` with --cooldowns: both ranks take the branch together (no rank waits in a
    collective), rank 0 writes it, and it matches the one-process branch to float reduction order."""
    import json

    from tests.launch import torchrun
    from tests.training.test_train import cli_args

    corpus, environ, _ = env
    out = tmp_path / "ddp"
    proc = torchrun(["-m", "interp.cli.train",
                     *cli_args(corpus, out, "--steps", "12", "--warmup-steps", "2", "--lr-schedule", "wsd",
                               "--cooldown-fraction", "0.5", "--cooldowns", "6", "--set", "eval_interval=6")],
                    env=environ)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((out / RESULT_FILE).read_text())
    assert result["world_size"] == 2 and [c["step"] for c in result["cooldowns"]] == [6]
    single = run(env, micro(env, tmp_path / "single", cooldowns=(6,), **{**WSD, "eval_interval": 6}))
    ddp_branch, one_branch = cooldown.branch_result(out, 6), cooldown.branch_result(tmp_path / "single", 6)
    assert ddp_branch["val_loss"] == pytest.approx(one_branch["val_loss"], abs=1e-4)
    wd, ws = weights(cooldown.branch_dir(out, 6)), weights(cooldown.branch_dir(tmp_path / "single", 6))
    for name in ws:
        torch.testing.assert_close(wd[name], ws[name], rtol=0, atol=1e-5)
    assert result["val_loss"] == pytest.approx(single["val_loss"], abs=1e-4)  # the main run went on alike


def test_ranks_that_disagree_on_a_finished_branch_stop_with_the_fix(tmp_path, monkeypatch):
    """A run directory that is not one shared filesystem: rank 0 sees the branch's result, another rank does not.
    Every rank gets the same count from the all-reduce, so all raise the same error instead of parting ways."""
    from types import SimpleNamespace

    monkeypatch.setattr(cooldown, "branch_result", lambda run_dir, length: {"step": length})
    world = SimpleNamespace(world_size=2)
    for seen, expect in ((2.0, True), (0.0, False)):
        rank = SimpleNamespace(out=tmp_path, dist=world, all_sum=lambda values, s=seen: [s])
        assert cooldown.branch_done(rank, 6) is expect
    rank = SimpleNamespace(out=tmp_path, dist=world, all_sum=lambda values: [1.0])
    with pytest.raises(RuntimeError, match=r"1 of 2 ranks see the result of the cooldown branch to 6 steps.*"
                                           r"filesystem all nodes share"):
        cooldown.branch_done(rank, 6)


# ------------------------------------------------------- issue #33 item 26: --cooldown-fraction without wsd
# It does nothing unless --lr-schedule wsd; it was stored anyway, and a resume without it (or with another value)
# was then refused as a changed config. Now it is dropped (one line on stderr) and ignored when runs are compared.

def _stored_fraction(fraction: float):
    """check: the run's config.json holds `fraction` as its cooldown_fraction."""
    def check(tmp) -> None:
        import json

        from tests.bad_inputs.test_bad_inputs_train import OUT
        assert json.loads((tmp / OUT / "config.json").read_text())["train"]["cooldown_fraction"] == fraction
    return check


def _old_run_with_fraction(tmp) -> None:
    """A stopped cosine run whose config.json stored cooldown_fraction 0.3 (as every run before the fix did)."""
    import json

    from tests.bad_inputs.test_bad_inputs_train import OUT, run_dir
    run_dir("stopped")(tmp)
    path = tmp / OUT / "config.json"
    doc = json.loads(path.read_text())
    assert doc["train"]["lr_schedule"] == "cosine"
    doc["train"]["cooldown_fraction"] = 0.3
    path.write_text(json.dumps(doc))


def _cases():
    from tests.badinput import Case
    from tests.bad_inputs.test_bad_inputs_train import MICRO, OUT, corpus

    Case("cooldown-fraction-without-wsd-is-not-stored", item="33.26", rc=0, setup=corpus,
         argv=[*MICRO, "--cooldown-fraction", "0.3"], check=_stored_fraction(0.2),
         message=r"^interp train: --cooldown-fraction 0\.3 ignored: only --lr-schedule wsd cools down \(this run's "
                 r"schedule is cosine\), so the run stores the default, 0\.2$",
         may_change=(OUT, "cache"))
    Case("cooldown-fraction-stored-by-an-old-run-still-resumes", item="33.26", rc=0, setup=_old_run_with_fraction,
         argv=[*MICRO, "--resume"], check=_stored_fraction(0.3), message=r"4/4", may_change=(OUT, "cache"))


_cases()


@pytest.mark.parametrize("case", [c for c in __import__("tests.badinput", fromlist=["CASES"]).CASES
                                  if c.id.startswith("cooldown-")], ids=lambda c: c.id)
def test_cooldown_fraction_case(case, tmp_path):
    from tests.badinput import check_case

    check_case(case, tmp_path)


def test_cooldown_fraction_is_compared_only_where_it_takes_effect():
    from interp.training.config import config_diff, fit_to_steps

    cosine = TrainConfig.from_preset("micro", cooldown_fraction=0.5)
    fitted, notes = fit_to_steps(cosine)
    assert fitted.cooldown_fraction == 0.2 and len(notes) == 1 and "--cooldown-fraction 0.5 ignored" in notes[0]
    assert not config_diff(cosine.to_dict(), TrainConfig.from_preset("micro"))   # an old run: still resumes
    wsd = TrainConfig.from_preset("micro", lr_schedule="wsd", cooldown_fraction=0.5, warmup_steps=1)
    assert fit_to_steps(wsd)[0].cooldown_fraction == 0.5                       # takes effect: kept, compared
    assert config_diff(wsd.to_dict(), dataclasses.replace(wsd, cooldown_fraction=0.3)) == [
        "cooldown_fraction: 0.5 -> 0.3"]
