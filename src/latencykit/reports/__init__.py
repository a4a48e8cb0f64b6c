"""Views of run files: the terminal, markdown, JSON, HTML and SVG reports of bench and experiment runs.

What this package owns: the bench run's terminal / markdown / JSON report and its comparison
tables (``_report``, ``_grid``), its standalone HTML page with inline SVG plots (``_html``,
``_svg``), the experiment's terminal table (``_exp_report``) and HTML page (``_exp_html``), and
the demo's latency tables (``_table``). A view reads a run model and never changes it; it may
import the bench, the experiment and every layer below them; no model imports a view.
"""
