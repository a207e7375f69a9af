"""Flows, their inputs and batches: the request that prepares a run, the flow player, the batch."""
