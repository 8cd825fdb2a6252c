from fme_ai_resilience.fme import CompensatorCaller


class FeatureProcessor(CompensatorCaller):
    """WS-03 for FME 2023 and 2024: the same work as ../WS-03_compensator.py, whose docstring says
    what the workspace does and lists its published parameters.

    This PythonCaller is version 4, which has one Output port: a feature no retry can fix
    leaves through it with fme_rejection_code set, and the Tester after the PythonCaller
    sends it to Logger_2. FME 2025 opens this file too.
    """

    rejected_port = False
