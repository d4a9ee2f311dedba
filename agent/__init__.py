"""Agents for the hidden-person week (imports ``simulator`` only; see STYLE rule 1).

Import from the modules, not from this package (it stays import-light)::

    from agent.belief import BeliefState          # Bayesian posterior over the profile
    from agent.teacher import BayesAgent          # the teacher (simulator Policy protocol)
    from agent.lab.policies import register_agent_policies   # "bayes", ... for `rhythm sim eval`

See docs/agent.md.
"""
