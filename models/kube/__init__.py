"""Importing a live Volcano + Ascend cluster into a contract scenario.

An input adapter beside :mod:`models.io`: it reads what ``kubectl get ... -o json|yaml``
prints (or lists the same objects through the Kubernetes API) and writes the contract's
scenario.  It knows nothing of the engines.  One module per source:

* :mod:`models.kube.source` — dump files, directories, stdin; diagnostics;
* :mod:`models.kube.nodes` — Node objects and device info in both ConfigMap modes;
* :mod:`models.kube.jobs` — Pods, PodGroups, PriorityClasses, the reschedule history;
* :mod:`models.kube.config` — the scheduler ConfigMap's ``init-params``;
* :mod:`models.kube.live` — the live reader (official ``kubernetes`` client, list calls);
* :mod:`models.kube.build` — the mapping itself (cluster-integration.md A.6).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from models.kube.build import ClusterImport, ImportResult
from models.kube.source import Diagnostics, read_dumps
from models.scenario import Scenario


def import_dumps(paths: Sequence[str], *, now: int | None = None,
                 previous: Scenario | None = None, stdin: TextIO | None = None,
                 strict: bool = True) -> ImportResult:
    """Import ``kubectl`` dumps (files, directories, ``-`` for stdin) into a scenario.

    ``strict=False``: an object the importer refuses takes out only its own job (or node),
    named in the warnings and in :attr:`ImportResult.refused`, and a running job that
    breaks a rule is imported as occupancy only (see :class:`ClusterImport`).

    Raises
    ------
    models.validation.InputError
        A file cannot be read or parsed, or (``strict``) an object is malformed; each
        message names the file or object and the field.
    """
    importer = ClusterImport(Diagnostics(), strict=strict)
    read_dumps(paths, importer.add, importer.diag, stdin=stdin)
    return importer.build(now=now, previous=previous)


__all__ = ["ClusterImport", "Diagnostics", "ImportResult", "import_dumps"]
