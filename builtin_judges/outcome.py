"""The simplest judge: trust the episode's own outcome."""

from __future__ import annotations

from owrl_sdk.api import Judge, Judgement, Trajectory


class OutcomeJudge(Judge):
    """Scores 1 when the episode ended in success (``done`` called), else 0.

    Infrastructure errors are not the policy's doing: they get no success label."""

    name = "outcome"

    async def judge(self, trajectory: Trajectory) -> Judgement:
        outcome = trajectory.outcome
        if outcome is None:
            return Judgement(judge=self.name, score=0.0, success=False, reason="episode never finished")
        if outcome.status == "infra_error":
            kind = outcome.failure.kind if outcome.failure else "infra"
            return Judgement(judge=self.name, score=0.0, success=None, reason=f"infrastructure error ({kind})")
        ok = outcome.status == "success"
        reason = "done was called" if ok else (outcome.failure.kind if outcome.failure else outcome.status)
        return Judgement(judge=self.name, score=1.0 if ok else 0.0, success=ok, reason=reason)
