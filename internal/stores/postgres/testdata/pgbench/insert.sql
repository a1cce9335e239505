INSERT INTO plain (id, body) VALUES (gen_random_uuid()::text, convert_to('{"id":"ch_1","amount":100,"currency":"eur"}', 'UTF8'));
