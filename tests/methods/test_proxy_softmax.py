"""proxy-softmax against a per-sample loop written from Zhai & Wu, BMVC 2019, §3 (normalized
softmax: cross-entropy of cos(x, p_k) / T over one proxy per class, embeddings and proxies
L2-normalised; Fehervari et al. 2019 eq. 15), in value and in the gradient of both the
embeddings and the proxies.

The method wraps pytorch-metric-learning's ``NormalizedSoftmaxLoss``, so the library is the
implementation under test and the loop is the independent reference.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dmlbench.methods import create_method
from tests.methods._batches import tensor_sum

C, DIM, TEMPERATURE = 10, 8, 0.05


def reference(
    emb: torch.Tensor, labels: torch.Tensor, proxies: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Mean over samples of −log softmax_y(cos(x, p_k) / T); ``proxies`` is (C, DIM)."""
    terms = []
    for x, y in zip(emb, labels, strict=True):
        x = x / torch.sqrt((x * x).sum())
        logits = [x @ (p / torch.sqrt((p * p).sum())) / temperature for p in proxies]
        log_z = torch.log(tensor_sum(torch.exp(v) for v in logits))
        terms.append(log_z - logits[int(y)])
    return sum(terms) / len(terms)


def loss_and_proxies(temperature: float = TEMPERATURE) -> tuple[torch.nn.Module, torch.Tensor]:
    """The method's loss in float64 and its proxy parameter (whatever its layout is)."""
    loss = create_method("proxy-softmax", {"temperature": temperature}, C, DIM).build_loss()
    loss = loss.double()
    (param,) = [p for p in loss.parameters() if p.numel() == C * DIM]
    with torch.no_grad():
        param.copy_(torch.randn(param.shape, generator=torch.Generator().manual_seed(7)))
    return loss, param


def as_class_rows(param: torch.Tensor) -> torch.Tensor:
    return param if param.shape == (C, DIM) else param.t()


def compare(emb: torch.Tensor, labels: torch.Tensor, temperature: float = TEMPERATURE) -> None:
    loss, param = loss_and_proxies(temperature)
    proxies = as_class_rows(param).detach().clone().requires_grad_(True)
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, ref = loss(e1, labels), reference(e2, labels, proxies, temperature)
    ours.backward()
    ref.backward()
    assert ref.item() > 0
    assert math.isclose(ours.item(), ref.item(), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)
    assert param.grad is not None
    torch.testing.assert_close(as_class_rows(param.grad), proxies.grad, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("temperature", [TEMPERATURE, 0.5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_reference_value_and_gradient(seed: int, temperature: float) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = 3.0 * torch.randn(16, DIM, generator=g, dtype=torch.float64)  # not unit: normalised
    labels = torch.randint(0, C, (16,), generator=g)
    compare(emb, labels, temperature)


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_match_the_reference(labels: torch.Tensor) -> None:
    emb = torch.randn(8, DIM, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    compare(emb, labels)


def test_is_the_cross_entropy_of_scaled_cosines() -> None:
    """Embeddings equal to their class's proxy direction: logit 1/T for the class, cos/T for
    the others, so the loss is log(1 + Σ_{k≠y} exp((cos_k − 1)/T))."""
    loss, param = loss_and_proxies()
    proxies = F.normalize(as_class_rows(param).detach(), dim=1)
    labels = torch.tensor([0, 3])
    value = float(loss(2.0 * proxies[labels], labels).detach())
    expected = 0.0
    for y in labels.tolist():
        cos = proxies @ proxies[y]
        expected += math.log(torch.exp((cos - 1.0) / TEMPERATURE).sum().item()) / 2
    assert math.isclose(value, expected, rel_tol=1e-9)
