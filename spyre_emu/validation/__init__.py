"""`spyre-emu validate`: silicon figures, the programs that reproduce them, and how close the simulator comes.

``workloads`` builds the measured workloads as programs; ``calibration`` reads a data folder's figures into
cases (a program and a measured figure each); ``measurements`` holds DESIGN.md §3's rows and why each miss
misses; ``cases`` simulates the calibration cases and renders their section; ``host`` runs the whole calls
through the host model; ``accuracy`` is the arithmetic (error, Spearman, regret). The pages they write:
docs/validation.md. Nothing here feeds the model.
"""
