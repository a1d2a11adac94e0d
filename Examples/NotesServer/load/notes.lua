-- wrk script for notes-server: a mix of writes and reads, and a count of every answer.
--   30% POST /notes          (a write; 201 is an acknowledged write, its id is recorded)
--   45% GET /notes/{id}      (an id at most the largest this thread has seen: always present)
--   15% GET /notes?limit=20  (the newest page, or one author's)
--   10% GET /search?q=…      (a term every load-written note contains, with an author)
-- Environment: NOTES_IDS_FILE  where to append the ids of acknowledged writes (one per line);
--              NOTES_SEED_ROWS the rows the database had before the run (ids 1…N exist);
--              NOTES_WRITE_PERCENT (default 30).
-- At the end it prints one line "RESULT key=value …" that scripts/load-test.sh reads.

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

function init(args)
  maxid = tonumber(os.getenv("NOTES_SEED_ROWS") or "0")
  writes = tonumber(os.getenv("NOTES_WRITE_PERCENT") or "30")
  created = 0
  other2xx = 0
  non2xx = 0
  statuses = {}
  local path = os.getenv("NOTES_IDS_FILE")
  if path then
    ids = io.open(path .. "." .. tid, "a")
    ids:setvbuf("line")
  end
  math.randomseed(os.time() + tid * 7919)
  authors = { "ann", "bob", "cho", "dee" }
  headers = { ["Content-Type"] = "application/json" }
end

function request()
  local r = math.random(100)
  local author = authors[math.random(#authors)]
  if r <= writes or maxid == 0 then
    local body = string.format('{"text":"load note %d from thread %d","author":"%s"}', math.random(1e9), tid, author)
    return wrk.format("POST", "/notes", headers, body)
  elseif r <= writes + 45 then
    return wrk.format("GET", "/notes/" .. math.random(maxid))
  elseif r <= writes + 60 then
    if r % 2 == 0 then
      return wrk.format("GET", "/notes?limit=20")
    end
    return wrk.format("GET", "/notes?limit=20&author=" .. author)
  end
  return wrk.format("GET", "/search?q=load&limit=10&author=" .. author)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
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
  local codes = {}
  for _, thread in ipairs(threads) do
    c = c + thread:get("created")
    o = o + thread:get("other2xx")
    n = n + thread:get("non2xx")
    for status, count in pairs(thread:get("statuses")) do
      codes[status] = (codes[status] or 0) + count
    end
  end
  local list = {}
  for status, count in pairs(codes) do table.insert(list, status .. ":" .. count) end
  table.sort(list)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d seconds=%.1f rps=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.1f created=%d other_2xx=%d non_2xx=%d " ..
    "connect_errors=%d read_errors=%d write_errors=%d timeouts=%d statuses=%s\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    c, o, n, e.connect, e.read, e.write, e.timeout, table.concat(list, ",")))
end
