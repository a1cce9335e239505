-- wrk script of loadbench: one case of the HTTP benchmarks.
-- wrk ... -s case.lua URL -- METHOD PATH KIND SEED ROWS RUN BODY
--   KIND fresh:   a new Idempotency-Key each request: RUN-<thread>-<n>
--        replay:  one of the ROWS keys the server completed: SEED-replay-<n mod ROWS>
--        rowkey:  an Idempotency-Key naming a seeded row: SEED-row-<n mod ROWS>
--        rowpath: GET PATH..SEED-row-<n mod ROWS>
-- RUN is a random prefix of this wrk run, so that no key repeats across runs.
-- done() prints one WRKRESULT line for the driver and exits 1 on any error
-- (a status >= 400, or a socket error): the driver also checks the server's counts.

local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  method, path, kind, seed, rows, run, body = args[1], args[2], args[3], args[4], tonumber(args[5]), args[6], args[7]
  if not body or not rows then
    io.stderr:write("case.lua: want METHOD PATH KIND SEED ROWS RUN BODY\n")
    os.exit(2)
  end
  if kind ~= "fresh" and kind ~= "replay" and kind ~= "rowkey" and kind ~= "rowpath" then
    io.stderr:write("case.lua: unknown KIND " .. kind .. "\n")
    os.exit(2)
  end
  n = 0
  headers = {["Content-Type"] = "application/json"}
  keyprefix = run .. "-" .. tid .. "-"
end

function request()
  n = n + 1
  if kind == "rowpath" then
    return wrk.format(method, path .. seed .. "-row-" .. (n % rows), {}, nil)
  end
  if kind == "fresh" then
    headers["Idempotency-Key"] = keyprefix .. n
  elseif kind == "replay" then
    headers["Idempotency-Key"] = seed .. "-replay-" .. (n % rows)
  else
    headers["Idempotency-Key"] = seed .. "-row-" .. (n % rows)
  end
  return wrk.format(method, path, headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRKRESULT requests=%d duration_us=%d status=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout))
  if e.status + e.connect + e.read + e.write + e.timeout > 0 then
    io.stderr:write(string.format("case.lua: %d answers with status >= 400, %d connect, %d read, %d write errors, %d timeouts\n",
      e.status, e.connect, e.read, e.write, e.timeout))
    os.exit(1)
  end
end
