"""LLM judges over provider clients (grading.md §6, §8, §9). See README.md.

No Django import here: the offline ``grade`` command builds judges without a database.
"""

from .budget import JudgeBudget, lane_share
from .judge import LLMJudge
from .loop import LoopThread
from .providers import PROVIDER_KINDS, ProviderConfig, ProviderError

__all__ = [
    "PROVIDER_KINDS",
    "JudgeBudget",
    "LLMJudge",
    "LoopThread",
    "ProviderConfig",
    "ProviderError",
    "lane_share",
]
