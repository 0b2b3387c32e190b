"""sklearn.metrics as Sedna's SeenTaskLearning.evaluate uses it."""


def precision_score(y_true, y_pred, average="binary", **kwargs):
    """Micro-averaged precision of single-label predictions: each prediction
    is one predicted label, so it is the share of predictions that are right
    (what scikit-learn computes for average="micro")."""
    if average != "micro":
        raise NotImplementedError(f"the harness's sklearn stub computes average='micro' only, not {average!r}")
    y_true, y_pred = list(y_true), list(y_pred)
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_true)} labels but {len(y_pred)} predictions")
    if not y_pred:
        return 0.0
    return sum(1 for t, p in zip(y_true, y_pred) if t == p) / len(y_pred)


def log_loss(*args, **kwargs):
    """Sedna's default when a metric's name is unknown; the harness's workers
    never use it."""
    raise NotImplementedError("the harness's sklearn stub has no log_loss")
