"""Everything shown from run records, one module per concern: reading the runs back (``runs``), the
terminal's tables (``tables``, printed whole by ``text``), their CSV twins (``csv_files``), the static HTML
page (``html``, with ``plain``, ``steps``, ``figures``, ``transcripts``) and the JSON session summary
(``summary``, with ``disclosure`` and ``provenance``).

The numbers all come from :mod:`pytest_fmlbench.scoring`; nothing here scores anything differently.
"""
