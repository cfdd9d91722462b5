# Helpers shared by the rules.

import os

import yaml

from lsa import paths
from lsa.config import from_mapping

PIPE = from_mapping(config)
PROFILE = PIPE.profile


def rel(path):
    """Paths relative to the repository, as Snakemake likes them."""
    return os.path.relpath(path, workflow.basedir)


def section_outputs(key):
    return {
        "notebook": rel(paths.executed_notebook(PROFILE, key)),
        "metrics": rel(paths.metrics_file(PROFILE, key)),
    }
