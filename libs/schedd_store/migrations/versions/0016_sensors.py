"""Sensors that hold no slot while they wait.

- ``task_instances.state`` may be ``up_for_reschedule``: a reschedule-mode sensor between two pokes
  of one try. Its ``next_retry_at`` is the time of its next poke (the column says when an
  ``up_for_retry`` or ``up_for_reschedule`` task instance runs again); a partial index finds the
  earliest.
- ``task_instances.first_poke_at``: when the first poke of the current try of a reschedule-mode
  sensor started (its timeout counts from it). Set while the try goes on from one poke to the
  next, so queueing the next poke keeps the try number; NULL once the try ends.
- ``task_attempts.state`` may be ``rescheduled`` (a poke said "not yet") or ``skipped`` (a soft-fail
  sensor passed its timeout).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from schedd_store.migrations.steps import execute_all

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_TASK_STATES = (
    "'none','scheduled','queued','running','success','failed','skipped','upstream_failed',"
    "'up_for_retry','removed'"
)
_ATTEMPT_STATES = "'running','success','failed','lost'"

UPGRADE = [
    "ALTER TABLE task_instances DROP CONSTRAINT task_instances_state_check",
    "ALTER TABLE task_instances ADD CONSTRAINT task_instances_state_check "
    f"CHECK (state IN ({_TASK_STATES},'up_for_reschedule'))",
    "ALTER TABLE task_instances ADD COLUMN first_poke_at timestamptz",
    "CREATE INDEX task_instances_poke_idx ON task_instances (next_retry_at) "
    "WHERE state = 'up_for_reschedule'",
    "ALTER TABLE task_attempts DROP CONSTRAINT task_attempts_state_check",
    "ALTER TABLE task_attempts ADD CONSTRAINT task_attempts_state_check "
    f"CHECK (state IN ({_ATTEMPT_STATES},'rescheduled','skipped'))",
]

DOWNGRADE = [
    "UPDATE task_instances SET state = 'up_for_retry' WHERE state = 'up_for_reschedule'",
    "UPDATE task_attempts SET state = 'lost' WHERE state = 'rescheduled'",
    "UPDATE task_attempts SET state = 'failed' WHERE state = 'skipped'",
    "ALTER TABLE task_attempts DROP CONSTRAINT task_attempts_state_check",
    "ALTER TABLE task_attempts ADD CONSTRAINT task_attempts_state_check "
    f"CHECK (state IN ({_ATTEMPT_STATES}))",
    "DROP INDEX task_instances_poke_idx",
    "ALTER TABLE task_instances DROP COLUMN first_poke_at",
    "ALTER TABLE task_instances DROP CONSTRAINT task_instances_state_check",
    f"ALTER TABLE task_instances ADD CONSTRAINT task_instances_state_check CHECK (state IN ({_TASK_STATES}))",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
