"""End-to-end tests: JupyterLab and Notebook 7 in headless Chromium."""
