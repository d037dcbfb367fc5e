"""The two ways a run ends before its agent is done, raised at the agent: no validation runs left, or a
token or dollar budget spent. Their own module because both sides raise them: the session (runs) and the
LLM client (budgets), which the session loads lazily."""


class BudgetExhausted(Exception):
    """No validation runs are left; agents may simply let this propagate."""


class RunStopped(Exception):
    """The run must end early (a token or dollar budget was exceeded); the reason is recorded."""
