"""What runs cost: prices per model, tokens and dollars paid and saved, and budgets.

``prices`` says what a model's tokens cost and where that figure came from; ``cost`` counts
a run's tokens and dollars (paid live, saved by replay, saved by caching), each step priced
by the model that answered it; ``budget`` stops a run before a call that could cross its
dollars or tokens.
"""
