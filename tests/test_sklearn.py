"""scikit-learn on Ember tensors through the array API (``ember.array_api``, DESIGN §11).

With ``sklearn.set_config(array_api_dispatch=True)`` (and ``SCIPY_ARRAY_API=1``, set in
tests/conftest.py before SciPy is imported) scikit-learn finds the namespace through
``Tensor.__array_namespace__``.  Each row fits/transforms or scores with Ember tensors in,
checks that Ember tensors (or Python floats, for scores) come out, and compares with
scikit-learn's own numpy results.  PCA, Ridge and LinearDiscriminantAnalysis run on
``xp.linalg`` (svd, eigh, solve: ``ember.linalg`` underneath).

Labels are integers, so scores computed from them use the namespace's default float,
float32 (as with PyTorch): those rows compare at float32 precision.
"""
import numpy as np
import pytest

import ember

sklearn = pytest.importorskip("sklearn")
from sklearn import decomposition, discriminant_analysis, linear_model  # noqa: E402
from sklearn import metrics, preprocessing  # noqa: E402
from sklearn.metrics import pairwise  # noqa: E402

RNG = np.random.default_rng(42)
X = RNG.standard_normal((24, 5))
X[:, 3] = 2.5                                  # a constant column (scale 0 is handled)
Y = RNG.standard_normal((7, 5))
Y_TRUE = RNG.standard_normal(40)
Y_PRED = Y_TRUE + 0.3 * RNG.standard_normal(40)
POS_TRUE, POS_PRED = np.abs(Y_TRUE) + 0.1, np.abs(Y_PRED) + 0.1
C_TRUE = RNG.integers(0, 3, 40)
C_PRED = np.where(RNG.random(40) < 0.7, C_TRUE, RNG.integers(0, 3, 40))
B_TRUE = RNG.integers(0, 2, 40)
SCORE = RNG.standard_normal(40) + B_TRUE
PROB = np.clip(1 / (1 + np.exp(-SCORE)), 0.02, 0.98)

F64, F32 = 1e-12, 2e-6


@pytest.fixture(autouse=True)
def array_api_dispatch():
    with sklearn.config_context(array_api_dispatch=True):
        yield


def _numpy(fn, *args, **kw):
    with sklearn.config_context(array_api_dispatch=False):
        return fn(*args, **kw)


def _compare(got, want, rtol):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _compare(g, w, rtol)
        return
    if isinstance(want, np.ndarray):
        assert isinstance(got, ember.Tensor), f"expected an ember tensor, got {type(got).__name__}"
        got = got.numpy()
        assert got.shape == want.shape
    else:
        assert isinstance(got, (float, int, np.floating, ember.Tensor)), type(got)
        got = float(got)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-3, equal_nan=True)


ESTIMATORS = [
    ("standard_scaler", lambda: preprocessing.StandardScaler(), X),
    ("standard_scaler_no_mean", lambda: preprocessing.StandardScaler(with_mean=False), X),
    ("min_max_scaler", lambda: preprocessing.MinMaxScaler(), X),
    ("min_max_scaler_range", lambda: preprocessing.MinMaxScaler((-1, 2)), X),
    ("max_abs_scaler", lambda: preprocessing.MaxAbsScaler(), X),
    ("normalizer_l2", lambda: preprocessing.Normalizer(), X),
    ("normalizer_l1", lambda: preprocessing.Normalizer("l1"), X),
    ("normalizer_max", lambda: preprocessing.Normalizer("max"), X),
    ("binarizer", lambda: preprocessing.Binarizer(threshold=0.2), X),
    ("kernel_centerer", lambda: preprocessing.KernelCenterer(), X @ X.T),
    ("polynomial_features", lambda: preprocessing.PolynomialFeatures(2), X),
]


@pytest.mark.parametrize("make, data", [e[1:] for e in ESTIMATORS], ids=[e[0] for e in ESTIMATORS])
def test_transformer_fit_transform_and_inverse(make, data):
    est = make().fit(ember.tensor(data))
    out = est.transform(ember.tensor(data))
    ref_est = _numpy(lambda: make().fit(data))
    want = _numpy(ref_est.transform, data)
    _compare(out, want, F64)
    if hasattr(est, "inverse_transform") and not isinstance(est, preprocessing.Normalizer):
        _compare(est.inverse_transform(out), _numpy(ref_est.inverse_transform, want), F64)
    for name in ("mean_", "scale_", "var_", "data_min_", "data_max_", "max_abs_"):
        if getattr(ref_est, name, None) is not None:
            _compare(getattr(est, name), getattr(ref_est, name), F64)


def test_standard_scaler_leaves_constant_columns_unscaled():
    """``_handle_zeros_in_scale`` assigns ``scale[constant_mask] = 1.0`` (``__setitem__``)."""
    est = preprocessing.StandardScaler().fit(ember.tensor(X))
    assert est.scale_.numpy()[3] == 1.0


def test_label_encoder_round_trip():
    enc = preprocessing.LabelEncoder().fit(ember.tensor(C_TRUE))
    codes = enc.transform(ember.tensor(C_TRUE))
    _compare(codes, _numpy(lambda: preprocessing.LabelEncoder().fit_transform(C_TRUE)), 0)
    _compare(enc.inverse_transform(codes), C_TRUE, 0)


REGRESSION = ["r2_score", "mean_squared_error", "root_mean_squared_error", "mean_absolute_error",
              "mean_absolute_percentage_error", "explained_variance_score", "max_error",
              "median_absolute_error", "mean_pinball_loss", "d2_pinball_score",
              "d2_absolute_error_score"]
POSITIVE_REGRESSION = ["mean_squared_log_error", "root_mean_squared_log_error",
                       "mean_poisson_deviance", "mean_gamma_deviance", "mean_tweedie_deviance",
                       "d2_tweedie_score"]
# (metric, keyword arguments); every one over three integer classes
CLASSIFICATION = [("accuracy_score", {}), ("zero_one_loss", {}), ("hamming_loss", {}),
                  ("f1_score", {"average": "macro"}), ("precision_score", {"average": "micro"}),
                  ("recall_score", {"average": "weighted"}), ("jaccard_score", {"average": "macro"}),
                  ("fbeta_score", {"beta": 0.5, "average": "macro"}), ("confusion_matrix", {}),
                  ("multilabel_confusion_matrix", {}), ("precision_recall_fscore_support", {}),
                  ("balanced_accuracy_score", {}), ("cohen_kappa_score", {})]
BINARY_SCORES = ["roc_auc_score", "average_precision_score", "roc_curve", "det_curve",
                 "precision_recall_curve"]
PROBABILITIES = ["log_loss", "brier_score_loss", "d2_brier_score", "d2_log_loss_score"]


def _metric_cases():
    for name in REGRESSION:
        yield pytest.param(name, (Y_TRUE, Y_PRED), {}, F64, id=name)
    for name in POSITIVE_REGRESSION:
        yield pytest.param(name, (POS_TRUE, POS_PRED), {}, F64, id=name)
    for name, kw in CLASSIFICATION:
        yield pytest.param(name, (C_TRUE, C_PRED), kw, F32, id=name)
    for name in BINARY_SCORES:
        yield pytest.param(name, (B_TRUE, SCORE), {}, F64, id=name)
    for name in PROBABILITIES:
        yield pytest.param(name, (B_TRUE, PROB), {}, F32, id=name)


@pytest.mark.parametrize("name, data, kw, rtol", list(_metric_cases()))
def test_metric(name, data, kw, rtol):
    fn = getattr(metrics, name)
    got = fn(*[ember.tensor(a) for a in data], **kw)
    want = _numpy(fn, *data, **kw)
    if name in ("roc_curve", "det_curve", "precision_recall_curve"):
        want = tuple(np.asarray(w) for w in want)
    _compare(got, want, rtol)


def test_metric_with_sample_weight():
    w = RNG.uniform(0.5, 2.0, 40)
    got = metrics.mean_squared_error(ember.tensor(Y_TRUE), ember.tensor(Y_PRED),
                                     sample_weight=ember.tensor(w))
    _compare(got, _numpy(metrics.mean_squared_error, Y_TRUE, Y_PRED, sample_weight=w), F64)


PAIRWISE = ["euclidean_distances", "cosine_similarity", "cosine_distances", "manhattan_distances",
            "linear_kernel", "polynomial_kernel", "rbf_kernel", "sigmoid_kernel",
            "laplacian_kernel"]
PAIRED = ["paired_euclidean_distances", "paired_cosine_distances", "paired_manhattan_distances"]


def _pairwise_cases():
    for name in PAIRWISE:
        yield pytest.param(getattr(pairwise, name), (X, Y), {}, id=name)
    for name in ("chi2_kernel", "additive_chi2_kernel"):
        yield pytest.param(getattr(pairwise, name), (np.abs(X), np.abs(Y)), {}, id=name)
    for name in PAIRED:
        yield pytest.param(getattr(pairwise, name), (X, X[::-1] + 0.1), {}, id=name)
    for metric in ("euclidean", "cosine", "manhattan"):
        yield pytest.param(metrics.pairwise_distances, (X, Y), {"metric": metric},
                           id=f"pairwise_distances_{metric}")
    yield pytest.param(metrics.pairwise_kernels, (X, Y), {"metric": "rbf"}, id="pairwise_kernels")
    yield pytest.param(metrics.pairwise_distances_argmin, (X, Y), {}, id="pairwise_distances_argmin")


@pytest.mark.parametrize("fn, data, kw", list(_pairwise_cases()))
def test_pairwise(fn, data, kw):
    got = fn(*[ember.tensor(a) for a in data], **kw)
    _compare(got, np.asarray(_numpy(fn, *data, **kw)), F64)


# estimators on xp.linalg: (name, make, fit arguments, fitted attributes to compare, and
# what to compare after fitting: name -> function of the fitted estimator and the data)
C_X = X + C_TRUE[:24, None]          # three classes that the features separate
LINALG_ESTIMATORS = [
    ("pca_full", lambda: decomposition.PCA(n_components=3, svd_solver="full"), (X,),
     ("components_", "explained_variance_", "explained_variance_ratio_", "singular_values_",
      "mean_"),
     {"transform": lambda e, a: e.transform(a),
      "inverse_transform": lambda e, a: e.inverse_transform(e.transform(a))}),
    ("pca_whiten", lambda: decomposition.PCA(n_components=2, svd_solver="full", whiten=True),
     (X,), ("components_", "noise_variance_"),
     {"transform": lambda e, a: e.transform(a)}),
    ("ridge_svd", lambda: linear_model.Ridge(alpha=0.5, solver="svd"), (X, Y_TRUE[:24]),
     ("coef_", "intercept_"), {"predict": lambda e, a: e.predict(a)}),
    ("ridge_svd_multi", lambda: linear_model.Ridge(alpha=2.0, solver="svd", fit_intercept=False),
     (X, np.stack([Y_TRUE[:24], Y_PRED[:24]], 1)), ("coef_",),
     {"predict": lambda e, a: e.predict(a)}),
    ("lda_svd", lambda: discriminant_analysis.LinearDiscriminantAnalysis(), (C_X, C_TRUE[:24]),
     ("coef_", "intercept_", "means_", "explained_variance_ratio_"),
     {"predict": lambda e, a: e.predict(a), "predict_proba": lambda e, a: e.predict_proba(a),
      "transform": lambda e, a: e.transform(a)}),
]


@pytest.mark.parametrize("make, fit_args, attributes, outputs",
                         [e[1:] for e in LINALG_ESTIMATORS], ids=[e[0] for e in LINALG_ESTIMATORS])
def test_linalg_estimator(make, fit_args, attributes, outputs):
    est = make().fit(*[ember.tensor(a) for a in fit_args])
    ref = _numpy(lambda: make().fit(*fit_args))
    for name in attributes:
        want = getattr(ref, name)
        _compare(getattr(est, name), np.asarray(want) if np.ndim(want) else float(want), F64 * 100)
    data = fit_args[0]
    for name, fn in outputs.items():
        _compare(fn(est, ember.tensor(data)), _numpy(fn, ref, data), F64 * 100)


def test_array_api_compat_finds_the_namespace():
    import array_api_compat
    import ember.array_api as xp
    t = ember.tensor([1.0, 2.0])
    assert array_api_compat.array_namespace(t) is xp
    assert array_api_compat.device(t) == t.device
    assert array_api_compat.is_writeable_array(t)
