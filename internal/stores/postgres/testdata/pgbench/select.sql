\set k random(0, 999)
SELECT body FROM plain WHERE id = 'pre-' || :k;
