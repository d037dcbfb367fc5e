"""One session as a file anyone can check: ``fmlbench bundle`` packs it, ``fmlbench verify`` checks it offline.

* :mod:`.archive`: the container (a streamed tar, compressed by the output's suffix) and its safe reading;
* :mod:`.pack`: what enters a bundle, what never does (keys, the hidden split, private data) and why;
* :mod:`.check`: the signature, the manifest's hashes, each run's integrity chain, the tables' comparison;
* :mod:`.tables`: the tables re-scored from the records, and field-by-field comparison to 1e-9;
* :mod:`.rerun`: one run's final test again, on the task at its recorded fingerprint.
"""

from __future__ import annotations

FORMAT = "fmlbench-bundle"
FORMAT_VERSION = 1
MANIFEST = "MANIFEST.json"
# an SSH signature of the manifest (ssh-keygen -Y sign), where the author signed the bundle
SIGNATURE = "MANIFEST.json.sig"
SIGNATURE_NAMESPACE = "fmlbench-bundle"


class BundleError(Exception):
    """A bundle that cannot be written or read; the message is one line for the user."""
