"""Angular loss (Wang et al., ICCV 2017; Fehervari et al. 2019 eq. 4–5), on N-pair batches.

For an anchor a with positive p, every image n of another class enters one smooth max::

    f_apn = 4 tan²α · (x_a + x_p)ᵀ x_n − 2 (1 + tan²α) · x_aᵀ x_p
    L     = mean over pairs (a, p) of  log(1 + Σ_{n: y_n ≠ y_a} exp f_apn)

Batches hold N classes × 2 images (N-pair batches, as Wang et al. train), so the mean over
ordered pairs (a, p) is the paper's 1/|B| Σ_a; with more images per class every ordered
same-class pair is a term.

pytorch-metric-learning's ``AngularLoss`` is exactly this on unit-norm embeddings (checked
against a per-pair loop of eq. 4–5 in tests/methods/test_angular.py) and is used, with the
embeddings L2-normalised first. The normalisation is deliberate: f_apn is the constraint
‖x_a − x_p‖² ≤ 4 tan²α ‖x_n − x_c‖² (x_c the centre of a and p) with the terms in ‖x‖²
dropped, exact only on the unit sphere, and it makes the loss scale-invariant as the paper
intends. It is done here rather than left to the library because pytorch-metric-learning
2.9 normalises the anchors and positives but not the negatives x_n (it multiplies by the raw
``ref_emb``), which on non-unit inputs is neither the paper's nor a scale-invariant loss.
Wang et al. did not normalise the network's last layer (Fehervari et al. 2019 Table 1) and Fehervari
et al.'s code applies eq. 5 to raw embeddings plus Sohn's L2 penalty; under
``normalize: true`` (glyphs-mini) the embeddings are unit vectors and all readings coincide.
Wang et al. also combine the loss with N-pair (λ-weighted); that combination is not part of
this method (Fehervari et al., Fehervari et al. 2019 §4.2, found no gain from it).

α defaults to 45°, the default of Fehervari et al.'s released code (``train_angular.py``); it
is the loss's one hyper-parameter and is searched over 30°–55°. Degenerate batches (no
positive pair, or no negative) give a zero loss that keeps the graph.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from pytorch_metric_learning import losses
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method


class Angular(nn.Module):
    def __init__(self, alpha_degrees: float) -> None:
        super().__init__()
        self.loss = losses.AngularLoss(alpha=alpha_degrees)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.loss(F.normalize(embeddings, dim=1), labels)


@register_method("angular")
class AngularMethod(Method):
    paper = "Wang et al., Deep Metric Learning with Angular Loss, ICCV 2017"
    defaults: ClassVar[HParams] = {"alpha": 45.0}
    defaults_source = (
        "Fehervari et al. 2019 eq. 4–5; α = 45° as in Fehervari et al.'s code (train_angular.py)"
    )
    samples_per_class = 2

    def build_loss(self) -> nn.Module:
        return Angular(float(self.hparams["alpha"]))

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        # α in degrees; N-pair batches are part of the method: samples_per_class stays 2.
        return {"alpha": trial.suggest_float("alpha", 30.0, 55.0)}
