"""An LLM judge beside Monte-Carlo: critiques of solutions that name their earliest wrong step
(ProcessBench's protocol), run as a resumable job on the labeling job's machinery, and the consensus
of its verdicts with Monte-Carlo labels.

- prompts.py: the critique prompt (the template and its placeholders);
- critique.py: reading the index a critique names;
- config.py: the judge's settings (JudgeConfig);
- unit.py: a work unit judged (JudgingTask: votes, resamples of unparseable critiques);
- tables.py: the judgments table; job.py: planning and running a judge job;
- consensus.py: Monte-Carlo labels kept where the judge agrees (labeler consensus).
"""
