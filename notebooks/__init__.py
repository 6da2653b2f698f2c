"""Figure notebooks (jupytext percent .py) and their headless runner: `python -m notebooks`, `make figures`."""
