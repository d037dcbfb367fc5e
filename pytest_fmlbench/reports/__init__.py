"""Reports built from run records: the static HTML page (``html``) and the JSON session summary (``summary``).

The tables' numbers come from :mod:`pytest_fmlbench.report` and :mod:`pytest_fmlbench.scoring`; nothing
here scores anything differently.
"""
