"""Using a PRM to decode: best-of-N selection over sampled candidates, and PRM-guided beam search.

- `candidates`: the pool of best-of-N, a labeling job with the final-answer strategy (sampled,
  checked, resumable like any job), read back as candidates with their answers and verdicts;
- `prm_scores`: each PRM's step scores of the candidates, kept in OUT/bon/scores so that a rerun
  with another PRM samples and scores nothing twice;
- `reranking`: pools of scored candidates, the accuracy curves of labeler/evaluation/best_of_n.py,
  the results document and its table;
- `beam_search`: step-level beam search on a Generator guided by a StepScorer.
"""
