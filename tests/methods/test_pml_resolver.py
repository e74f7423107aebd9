"""``pml:<Loss>[+<Miner>]`` names: resolution, protocol arguments, refusals, CLI behaviour."""

from __future__ import annotations

import pytest
import torch
from pytorch_metric_learning import losses, miners

from dmlbench.cli.main import main
from dmlbench.errors import DmlbenchError, RegistryError
from dmlbench.methods import METHODS, create_method
from dmlbench.methods._library import PMLLoss


def test_circle_resolves_with_the_library_defaults() -> None:
    assert "pml:CircleLoss" in METHODS
    cls = METHODS.get("pml:CircleLoss")
    assert cls.defaults == {"m": 0.4, "gamma": 80}
    assert "Sun et al." in cls.paper and cls.lr_mult_key is None
    loss = create_method("pml:CircleLoss", {"m": 0.25}, 10, 16).build_loss()
    assert isinstance(loss, PMLLoss) and isinstance(loss.loss, losses.CircleLoss)
    assert loss.loss.m == 0.25
    # resolved names are not listed: `--method all` keeps meaning the curated methods
    assert "pml:CircleLoss" not in METHODS.list()


def test_loss_with_miner_passes_the_mined_tuples() -> None:
    method = create_method("pml:TripletMarginLoss+MultiSimilarityMiner", None, 10, 16)
    assert method.hparams["miner_epsilon"] == 0.1 and method.hparams["margin"] == 0.05
    loss = method.build_loss()
    assert isinstance(loss.miner, miners.MultiSimilarityMiner)
    torch.manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(16, 16), dim=1)
    y = torch.arange(4).repeat_interleave(4)
    expected = losses.TripletMarginLoss()(x, y, miners.MultiSimilarityMiner()(x, y))
    torch.testing.assert_close(loss(x, y), expected)


def test_protocol_arguments_and_learnable_parameters() -> None:
    method = create_method("pml:CosFaceLoss", None, num_classes=7, embedding_size=12)
    assert method.lr_mult_key == "proxy_lr_mult" and method.hparams["proxy_lr_mult"] == 100.0
    loss = method.build_loss()
    assert tuple(loss.loss.W.shape) == (12, 7)
    method = create_method("pml:CosFaceLoss", {"proxy_lr_mult": 10.0}, 7, 12)
    (group,) = method.param_groups(method.build_loss(), lr=1e-3)
    assert group["lr"] == pytest.approx(1e-2)


def test_a_misspelt_loss_is_one_line_with_did_you_mean() -> None:
    with pytest.raises(RegistryError) as err:
        METHODS.get("pml:CircleLos")
    assert "did you mean 'CircleLoss'" in str(err.value) and "\n" not in str(err.value)
    assert "pml:CircleLos" not in METHODS
    with pytest.raises(RegistryError, match="did you mean 'MultiSimilarityMiner'"):
        METHODS.get("pml:TripletMarginLoss+MultiSimilarityMinr")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("pml:VICRegLoss", "self-supervised"),
        ("pml:SelfSupervisedLoss", "self-supervised"),
        ("pml:CrossBatchMemory", "cross-batch wrapper"),
        ("pml:RankedListLoss", "no default for margin, Tn"),
        ("pml:InstanceLoss", "depends on batch order"),
        ("pml:P2SGradLoss+BatchHardMiner", "indices_tuple is not supported"),
    ],
)
def test_losses_that_cannot_work_are_refused_with_the_reason(name: str, why: str) -> None:
    with pytest.raises(DmlbenchError, match=why) as err:
        METHODS.get(name)
    assert "\n" not in str(err.value)
    assert name not in METHODS


def test_cli_runs_exit_2_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--method", "pml:VICRegLoss", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "self-supervised" in err
    assert main(["run", "--method", "pml:CirclLoss", "--no-progress"]) == 2
    assert "did you mean 'CircleLoss'" in capsys.readouterr().err


def test_cli_lists_catalogue_multipliers_and_library_losses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list", "methods"]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.split()[0] in METHODS.list()]
    assert len(rows) >= 40
    (proxy_anchor,) = [r for r in rows if r.split()[0] == "proxy-anchor"]
    assert proxy_anchor.split()[2] == "100" and "Kim et al." in proxy_anchor
    (circle,) = [r for r in rows if r.split()[0] == "circle"]
    assert circle.split()[2] == "—"
    assert main(["list", "methods", "pml:*"]) == 0
    out = capsys.readouterr().out
    assert "pml:CircleLoss" in out and "pml:VICRegLoss" in out and "refused" in out


def test_the_library_instance_loss_depends_on_batch_order() -> None:
    """Why ``pml:InstanceLoss`` is refused: one perfect embedding, two orders, two values."""
    e1, e2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    grouped = losses.InstanceLoss()(torch.stack([e1, e1, e2, e2]), torch.tensor([0, 0, 1, 1]))
    mixed = losses.InstanceLoss()(torch.stack([e1, e2, e1, e2]), torch.tensor([0, 1, 0, 1]))
    assert float(grouped) > 10 * float(mixed)
