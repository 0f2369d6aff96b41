-- The highest attempt number an activity had when a resume last reopened it (0: never):
-- attempts numbered up to it count toward no retry budget.
SELECT resumed_after FROM activities WHERE owner_id = ? AND id = ?
