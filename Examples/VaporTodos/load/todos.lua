-- wrk script for vapor-todos: a mix of writes and reads on one project, and a count of every answer.
--   30% POST /projects/{p}/todos     (a write; 201 is an acknowledged write, its id is recorded)
--   40% GET /todos/{id}              (an id at most the largest this thread has seen: always present)
--   20% GET /projects/{p}/todos?limit=20
--   10% PATCH /todos/{id}            (a write that changes a row)
-- Environment: TODOS_IDS_FILE where to append the ids of acknowledged writes (one per line, per thread);
--              TODOS_PROJECT  the project's id; TODOS_SEED the todos it had before (ids 1…N exist).
-- At the end it prints one line "RESULT key=value …" that scripts/vapor-load-test.sh reads.

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

function init(args)
  maxid = tonumber(os.getenv("TODOS_SEED") or "0")
  project = os.getenv("TODOS_PROJECT") or "1"
  created = 0
  other2xx = 0
  non2xx = 0
  local path = os.getenv("TODOS_IDS_FILE")
  if path then
    ids = io.open(path .. "." .. tid, "a")
    ids:setvbuf("line")
  end
  math.randomseed(os.time() + tid * 7919)
  headers = { ["Content-Type"] = "application/json" }
end

function request()
  local r = math.random(100)
  if r <= 30 or maxid == 0 then
    local body = string.format('{"title":"load todo %d from thread %d"}', math.random(1e9), tid)
    return wrk.format("POST", "/projects/" .. project .. "/todos", headers, body)
  elseif r <= 70 then
    return wrk.format("GET", "/todos/" .. math.random(maxid))
  elseif r <= 90 then
    return wrk.format("GET", "/projects/" .. project .. "/todos?limit=20")
  end
  return wrk.format("PATCH", "/todos/" .. math.random(maxid), headers, '{"done":true}')
end

function response(status, headers, body)
  if status == 201 then
    created = created + 1
    local id = tonumber(string.match(body, '"id":(%d+)'))
    if id then
      if id > maxid then maxid = id end
      if ids then ids:write(id, "\n") end
    end
  elseif status >= 200 and status < 300 then
    other2xx = other2xx + 1
  else
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local c, o, n = 0, 0, 0
  for _, thread in ipairs(threads) do
    c = c + thread:get("created")
    o = o + thread:get("other2xx")
    n = n + thread:get("non2xx")
  end
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d seconds=%.1f rps=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.1f created=%d other_2xx=%d non_2xx=%d " ..
    "connect_errors=%d read_errors=%d write_errors=%d timeouts=%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    c, o, n, e.connect, e.read, e.write, e.timeout))
end
