--[[
slurm-fair job_submit.lua -- rendered by `slurm-fair render-config` from
templates/deploy/job_submit.lua.j2. Install it beside slurm.conf and set JobSubmitPlugins=lua.

Sends a new untyped GPU job (--gres=gpu:2, --gpus=2, --gpus-per-node/-socket/-task) submitted to
a partition of several GPU types where the controller's latest plan wants it, before Slurm can
start it on whatever node comes first: its partitions become the single-type partitions the plan
prefers for its account and class (only those whose nodes can hold it), and its admin comment
records what it asked for and what it was given ("slurm-fair:partition=gpu
slurm-fair:routed=v100,p100"; users cannot set an admin comment, so the controller may trust it,
and `slurm-fair revert` puts the partition back while the job is still where the plugin put it;
a job its user moved since is theirs: slurm_fair/controller/asked.py). Slurm tries the listed
partitions by PriorityTier (fastest type first in slurm-fair's configuration). It never types
the request itself, also where Slurm could undo that (>= 23.11): the controller does at its next
cycle, after recording the original request, so `slurm-fair revert` can give it back exactly.

The site's own job_submit.lua ([controller] site_job_submit, rendered below as SITE_SCRIPT)
runs first, on every job: what it sets (a partition, a QOS, ...) is what the job asked for, and
when it rejects a job, that is the answer. A site script that cannot be loaded rejects every job,
as slurmctld would with a broken plugin (its policy is never skipped silently).

Only the pilot's jobs are steered: accounts of "scope/accounts" (absent: all) submitted to a
partition of "spans/" (the controller writes only the pilot's partitions). A user's choice of
where a job runs is never narrowed: a job that names several partitions, nodes (-w), excluded
nodes (-x), a reservation, features (-C), a dependency, or is submitted held is left as it is
(M.user_choice: the rule of slurm_fair.controller.steer.user_choice, tested against it on the
same generated jobs). So is a job whose fit the plan's node shapes cannot tell (M.beyond_shapes:
a generic resource other than GPUs, --mem-per-gpu, --cpus-per-gpu, licences): the controller
steers it at its next cycle, and sends it back where it asked if Slurm refuses it there.
A type's partition is offered only when its PriorityTier is not above the asked partition's
(spantier/), and its MaxTime and MaxNodes admit the job (maxtime/, maxnodes/; the controller
lists only partitions open to every pilot account, QOS and group).

Never rejects or fails a job of its own accord: on a missing, unreadable, malformed or stale
plan, a typed request, a partition of one GPU type, no partition that can hold the job, or any
error of its own, the job goes through untouched (slurm.SUCCESS). Lua 5.1.

Plan file (slurm_fair/controller/planfile.py): one flat JSON object, one pair per line:
    "format": 2, "generated_at": <unix s>, "expires_at": <unix s>,
    "spans/<partition>": "<types>", "partition/<type>": "<partition>", "tier/<type>": "<n>",
    "shapes/<type>": "<gpus>x<cpus>x<mem MB>x<count> ...", "speeds/<class>": "<type>=<n> ...",
    "room/<account>": "<types>"
Speeds of `fair:class=NAME` from --comment (speeds/NAME@G for a gang of G GPUs, else speeds/NAME,
else speeds/*), room of the account (else room/*).
The choice (M.prefer) mirrors slurm_fair.controller.planfile.prefer, tested against it.
--]]

local PLAN_FILE = "/var/lib/slurm-fair/plan.json"
local SITE_SCRIPT = ""
local MAX_AGE_S = 180
local PLAN_FORMAT = "2"
local MAX_LINES = 100000
local MARK = "slurm-fair:partition="
-- the partition(s) it gave the job: a later move by anyone else is then told apart from its own
local ROUTED = "slurm-fair:routed="
-- a listed type Slurm may try first must be at least this fraction of the best listed speed
local SLOWER = 0.9
local TRES_FIELDS = { "tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task" }
-- Slurm's "not set" values arrive as huge numbers (NO_VAL, NO_VAL16, the MEM_PER_CPU flag)
local UNSET = 65534

-- A global table so a test driver can call the pieces (slurmctld ignores it).
slurm_fair = {}
local M = slurm_fair

local function valid_name(t)
  return type(t) == "string" and string.len(t) <= 64 and string.find(t, "^[%w_][%w%._%-]*$") ~= nil
end

local function valid_class(c)
  return type(c) == "string" and string.len(c) <= 64 and string.find(c, "^%w[%w%._%+%-]*$") ~= nil
end

function M.words(s, sep)
  local out = {}
  if type(s) ~= "string" then return out end
  for w in string.gmatch(s, "[^" .. (sep or "%s") .. "]+") do table.insert(out, w) end
  return out
end

-- Read and check the plan. Returns the table of pairs, or nil and the reason.
function M.read_plan(path, now)
  local fh = io.open(path, "r")
  if fh == nil then
    return nil, "missing or unreadable"
  end
  local plan, lines, first, last = {}, 0, nil, nil
  for raw in fh:lines() do
    lines = lines + 1
    if lines > MAX_LINES then
      fh:close()
      return nil, "too long"
    end
    local line = string.gsub(raw, "^%s+", "")
    line = string.gsub(line, "%s+$", "")
    if line ~= "" then
      if first == nil then first = line end
      last = line
      if line ~= "{" and line ~= "}" then
        local k, v = string.match(line, '^"([^"]+)": "?([^",]*)"?,?$')
        if k == nil then
          fh:close()
          return nil, "malformed line " .. lines
        end
        plan[k] = v
      end
    end
  end
  fh:close()
  if first ~= "{" or last ~= "}" then
    return nil, "malformed (not one complete object)"
  end
  if plan["format"] ~= PLAN_FORMAT then
    return nil, "unknown format " .. tostring(plan["format"])
  end
  local generated, expires = tonumber(plan["generated_at"]), tonumber(plan["expires_at"])
  if generated == nil or expires == nil then
    return nil, "malformed (no generated_at/expires_at)"
  end
  if now > expires or now - generated > MAX_AGE_S then
    return nil, "stale (generated " .. (now - generated) .. " s ago)"
  end
  return plan
end

-- One element of a tres_per_* string. Returns "untyped" with (prefix, count suffix),
-- "typed", or "other" (not a GPU).  gres:gpu:2 / gres/gpu:2 / gpu:2 / gres:gpu -> untyped.
function M.classify(elem)
  local prefix, rest = string.match(elem, "^(gres[:/])gpu(.*)$")
  if prefix == nil then
    rest = string.match(elem, "^gpu(.*)$")
    prefix = ""
    if rest == nil then return "other" end
  end
  if rest == "" then return "untyped", prefix, "" end
  local count = string.match(rest, "^:(%d+)$")
  if count ~= nil then
    if tonumber(count) == 0 then return "other" end
    return "untyped", prefix, ":" .. count
  end
  if string.find(rest, "^:[%a][^:]*") ~= nil then return "typed" end
  return "other"
end

function M.job_class(comment)
  if type(comment) ~= "string" then return "*" end
  local c = string.match(comment, "fair:class=([^%s,;]*)")
  if valid_class(c) then return c end
  return "*"
end

-- "k80=0.16 v100=1" -> { k80 = 0.16, v100 = 1 } (only valid type names and positive numbers)
function M.speeds(text)
  local out = {}
  for _, w in ipairs(M.words(text)) do
    local t, v = string.match(w, "^([^=]+)=([%d%.eE+-]+)$")
    local n = tonumber(v)
    if valid_name(t) and n ~= nil and n > 0 then out[t] = n end
  end
  return out
end

-- The types to offer, best first: planfile.prefer in Lua. `cands`: types the job may get whose
-- nodes hold it and where its class runs; `room`: set of types where the tenant has room.
function M.prefer(cands, speed, room, tier)
  local roomy = {}
  for _, t in ipairs(cands) do
    if room[t] then table.insert(roomy, t) end
  end
  local pool = cands
  if #roomy > 0 then
    local best = 0
    for _, t in ipairs(roomy) do
      if speed[t] > best then best = speed[t] end
    end
    pool = {}
    for _, t in ipairs(roomy) do
      if speed[t] >= SLOWER * best then table.insert(pool, t) end
    end
  end
  local sorted = {}
  for _, t in ipairs(pool) do table.insert(sorted, t) end
  table.sort(sorted, function(a, b)
    if speed[a] ~= speed[b] then return speed[a] > speed[b] end
    if (tier[a] or 0) ~= (tier[b] or 0) then return (tier[a] or 0) > (tier[b] or 0) end
    return a < b
  end)
  local out = {}
  for _, t in ipairs(sorted) do
    local ok = true
    for _, u in ipairs(out) do
      if (tier[t] or 0) >= (tier[u] or 0) and speed[t] < SLOWER * speed[u] then
        ok = false
        break
      end
    end
    if ok then table.insert(out, t) end
  end
  return out
end

local function number(v)
  local n = tonumber(v)
  if n == nil or n < 0 or n >= UNSET then return nil end
  return n
end

-- What one node of the job must hold, from its request: gpus (per node), nodes, cpus, mem (MB).
function M.need(job_desc, field, count)
  local nodes = number(job_desc.min_nodes) or 1
  if nodes < 1 then nodes = 1 end
  local gpn = count
  if field ~= "tres_per_node" then
    -- --gpus / --gpus-per-task: split over at most max_nodes nodes; unset counts as the node
    -- count (the safe side: a partition is listed only if it can hold the job on that many)
    local tasks = number(job_desc.num_tasks) or 1
    local total = count
    if field == "tres_per_task" then total = count * math.max(tasks, 1) end
    local spread = number(job_desc.max_nodes) or nodes
    if spread < nodes then spread = nodes end
    gpn = math.ceil(total / spread)
  end
  local mem = tonumber(job_desc.pn_min_memory)
  if mem == nil or mem >= 2 ^ 62 or mem < 0 then mem = 0 end  -- per CPU (flag bit) or unset
  local total = gpn * nodes
  if field ~= "tres_per_node" then
    total = count
    if field == "tres_per_task" then total = count * math.max(number(job_desc.num_tasks) or 1, 1) end
  end
  return { gpus = gpn, nodes = nodes, cpus = number(job_desc.pn_min_cpus) or 0, mem = mem, total = total }
end

-- The speeds entry of a class for a job of `total` GPUs: "speeds/C@G" for the largest G <= total
-- there is (speed-ups differ by type), else "speeds/C", else "speeds/*" (planfile.speed_key).
function M.speed_key(plan, class, total)
  local g = math.min(math.floor(tonumber(total) or 1), 1024)
  while g > 1 do
    if plan["speeds/" .. class .. "@" .. g] ~= nil then return "speeds/" .. class .. "@" .. g end
    g = g - 1
  end
  if plan["speeds/" .. class] ~= nil then return "speeds/" .. class end
  return "speeds/*"
end

-- Whether the nodes of "GxCxMxN ..." hold `need`: at least need.nodes of them each hold one
-- node's part (GPUs, CPUs, memory; 0: unknown, never excludes), whatever their sizes
-- (slurm_fair.controller.steer.partition_holds for a per-node request, tested against it).
function M.fits(shapes, need)
  local hosts = 0
  for _, s in ipairs(M.words(shapes)) do
    local g, c, m, n = string.match(s, "^(%d+)x(%d+)x(%d+)x(%d+)$")
    if g ~= nil and tonumber(g) >= need.gpus
       and (tonumber(c) == 0 or tonumber(c) >= need.cpus) and (tonumber(m) == 0 or tonumber(m) >= need.mem) then
      hosts = hosts + tonumber(n)
    end
  end
  return hosts >= need.nodes
end

-- Why the job is left to the controller (nil: the plugin may choose its partitions): what the
-- plan's node shapes cannot tell, a generic resource other than GPUs, memory or CPUs per GPU,
-- licences. The controller sends it where Slurm can hold it, or back where it asked when
-- Slurm refuses it (BadConstraints).
function M.beyond_shapes(job_desc)
  local function set(v) return type(v) == "string" and v ~= "" end
  for _, f in ipairs(TRES_FIELDS) do
    local v = job_desc[f]
    if set(v) then
      for elem in string.gmatch(v, "[^,]+") do
        local name = string.match(elem, "^gres[:/]([^:=]+)")
        if name ~= nil and name ~= "gpu" then return "asks for " .. name .. " (not GPUs)" end
      end
    end
  end
  if set(job_desc.mem_per_tres) then return "asks for memory per GPU" end
  if set(job_desc.cpus_per_tres) then return "asks for CPUs per GPU" end
  if set(job_desc.licenses) then return "asks for licences" end
  return nil
end

-- The partition(s) the job asked for: its own, else the default one of part_list.
function M.asked(job_desc, part_list)
  if type(job_desc.partition) == "string" and job_desc.partition ~= "" then return job_desc.partition end
  if type(part_list) == "table" then
    for _, p in pairs(part_list) do
      if type(p) == "table" and p.flag_default == 1 and valid_name(p.name) then return p.name end
    end
  end
  return nil
end

-- Why where the job runs is its owner's choice (nil: it may be steered).
function M.user_choice(job_desc, asked_by_user)
  local function set(v) return type(v) == "string" and v ~= "" end
  if asked_by_user and string.find(job_desc.partition, ",", 1, true) ~= nil then
    return "asked for several partitions"
  end
  if set(job_desc.req_nodes) then return "asked for nodes" end
  if set(job_desc.exc_nodes) then return "excludes nodes" end
  if set(job_desc.reservation) then return "runs in a reservation" end
  if set(job_desc.features) then return "asks for node features" end
  -- at submission a dependency is one Slurm has not found met, and a priority of 0 is the
  -- hold (-H): the reasons slurm_fair.controller.steer.user_choice reads later (tested against it)
  if tonumber(job_desc.priority) == 0 then return "held" end
  if set(job_desc.dependency) then return "waits for a dependency" end
  return nil
end

-- Whether the plan's pilot includes `account` ("scope/accounts" absent: every account).
function M.in_scope(plan, account)
  local scope = plan["scope/accounts"]
  if scope == nil then return true end
  for _, a in ipairs(M.words(scope)) do
    if a == account then return true end
  end
  return false
end

-- The whole decision for one job. Returns (changes table or nil, reason). Pure apart from
-- reading the plan file.
function M.decide(job_desc, part_list, now)
  local specs, untyped, field, count = {}, false, nil, 0
  for _, f in ipairs(TRES_FIELDS) do
    local v = job_desc[f]
    if v ~= nil and v ~= "" then
      for elem in string.gmatch(v, "[^,]+") do
        local kind, _, suffix = M.classify(elem)
        if kind == "typed" then return nil, "typed request (" .. f .. "=" .. v .. ")" end
        if kind == "untyped" then
          untyped = true
          if field == nil then
            field = f
            count = tonumber(string.sub(suffix, 2)) or 1
          end
        end
      end
      specs[f] = v
    end
  end
  if not untyped then return nil, "no untyped GPU request" end
  local chosen = M.user_choice(job_desc, type(job_desc.partition) == "string" and job_desc.partition ~= "")
  if chosen ~= nil then return nil, "the user's choice: " .. chosen end
  local beyond = M.beyond_shapes(job_desc)
  if beyond ~= nil then return nil, "left to the controller: " .. beyond end
  local plan, why = M.read_plan(PLAN_FILE, now)
  if plan == nil then return nil, "plan " .. PLAN_FILE .. " " .. why end
  local account = job_desc.account
  if account == nil or account == "" then account = job_desc.default_account end
  if account == nil or account == "" then account = "*" end
  account = string.lower(account)
  if not M.in_scope(plan, account) then return nil, "account " .. account .. " is not in the pilot" end
  local asked = M.asked(job_desc, part_list)
  if asked == nil then return nil, "no partition" end
  local allowed, top = {}, nil
  for _, p in ipairs(M.words(asked, ",")) do
    local span = plan["spans/" .. p]
    if span == nil then return nil, "partition " .. p .. " is not one of several GPU types" end
    for _, t in ipairs(M.words(span)) do allowed[t] = true end
    local st = tonumber(plan["spantier/" .. p])
    if st ~= nil and (top == nil or st > top) then top = st end
  end
  local limit = number(job_desc.time_limit)
  local class = M.job_class(job_desc.comment)
  local need = M.need(job_desc, field, count)
  local key = M.speed_key(plan, class, need.total)
  local speed = M.speeds(plan[key])
  local room_key = "room/" .. account
  if plan[room_key] == nil then room_key = "room/*" end
  local room = {}
  for _, t in ipairs(M.words(plan[room_key])) do room[t] = true end
  local tier, cands, part_of = {}, {}, {}
  for t, _ in pairs(allowed) do
    local part = plan["partition/" .. t]
    local ptier, maxtime, maxnodes = tonumber(plan["tier/" .. t]), tonumber(plan["maxtime/" .. t]),
      tonumber(plan["maxnodes/" .. t])
    local admitted = (top == nil or ptier == nil or ptier <= top)
      and (maxtime == nil or limit == nil or limit <= maxtime)
      and (maxnodes == nil or need.nodes <= maxnodes)
    if speed[t] ~= nil and valid_name(part) and admitted and M.fits(plan["shapes/" .. t], need) then
      table.insert(cands, t)
      part_of[t] = part
      tier[t] = tonumber(plan["tier/" .. t]) or 0
    end
  end
  table.sort(cands)
  local fitting = {}
  for _, t in ipairs(M.prefer(cands, speed, room, tier)) do
    table.insert(fitting, { type = t, partition = part_of[t] })
  end
  if #fitting == 0 then return nil, "no listed partition can hold the job" end
  local changes = {}
  local parts, seen = {}, {}
  for _, f in ipairs(fitting) do
    if not seen[f.partition] then
      table.insert(parts, f.partition)
      seen[f.partition] = true
    end
  end
  changes.partition = table.concat(parts, ",")
  local record = MARK .. asked .. " " .. ROUTED .. changes.partition
  local note = job_desc.admin_comment
  if note == nil or note == "" then
    changes.admin_comment = record
  elseif string.find(note, MARK, 1, true) == nil then
    changes.admin_comment = note .. " " .. record
  else
    return nil, "its admin comment already records a partition"
  end
  return changes, account .. "/" .. class .. " (" .. key .. ", " .. room_key .. ") -> partitions " .. changes.partition
    .. " (plan cycle " .. tostring(plan["cycle"]) .. ")"
end

local function log(fmt, ...)
  if slurm ~= nil and slurm.log_info ~= nil then slurm.log_info(fmt, ...) end
end

-- The site's own plugin, loaded first (SITE_SCRIPT; "": none). Its functions are kept before
-- ours are defined (it defines the same global names).
local site_submit, site_modify, site_error = nil, nil, nil
if SITE_SCRIPT ~= "" then
  local chunk, err = loadfile(SITE_SCRIPT)
  if chunk == nil then
    site_error = err
  else
    local ok, err2 = pcall(chunk)
    if not ok then
      site_error = err2
    else
      site_submit, site_modify = slurm_job_submit, slurm_job_modify
    end
  end
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if site_error ~= nil then
    log("slurm-fair: the site's job_submit.lua %s cannot be loaded (%s): job rejected", SITE_SCRIPT,
        tostring(site_error))
    return slurm.ERROR
  end
  if site_submit ~= nil then
    local rc = site_submit(job_desc, part_list, submit_uid)
    if rc ~= slurm.SUCCESS then return rc end
  end
  local ok, err = pcall(function()
    local changes, why = M.decide(job_desc, part_list, os.time())
    if changes == nil then
      if slurm.log_debug ~= nil then slurm.log_debug("slurm-fair: job untouched: %s", why) end
      return
    end
    -- the record of what the job asked for first: a job is never steered without it
    if changes.admin_comment ~= nil then job_desc.admin_comment = changes.admin_comment end
    for f, v in pairs(changes) do
      if f ~= "admin_comment" then job_desc[f] = v end
    end
    log("slurm-fair: GPU job of uid %s: %s", tostring(submit_uid), why)
  end)
  if not ok then
    log("slurm-fair: error, job left as submitted: %s", tostring(err))
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if site_error ~= nil then return slurm.ERROR end
  if site_modify ~= nil then return site_modify(job_desc, job_rec, part_list, modify_uid) end
  return slurm.SUCCESS
end

return slurm.SUCCESS
