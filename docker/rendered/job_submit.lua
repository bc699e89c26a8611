--[[
slurm-fair job_submit.lua -- rendered by `slurm-fair render-config` from
templates/deploy/job_submit.lua.j2. Install it beside slurm.conf and set JobSubmitPlugins=lua.

Types untyped GPU requests at submission (--gres=gpu:2, --gpus=2, --gpus-per-node/-socket/-task)
from the controller's latest plan file, so a tenant's typed QOS limits (GrpTRES=gres/gpu:TYPE=N)
bind from the first second instead of from the next controller cycle. The count is kept.

Never rejects or fails a job: on a missing, unreadable, malformed or stale plan, a typed request,
or any error of its own, the job goes through untouched (always slurm.SUCCESS). Lua 5.1.

Plan file (slurm_fair/controller/planfile.py): one flat JSON object, one pair per line:
    "format": 1, "generated_at": <unix s>, "expires_at": <unix s>, "gpu_type/<account>/<class>": "<type>"
Lookup: <account>/<class>, <account>/*, */<class>, */*; class from `fair:class=NAME` in --comment.
--]]

local PLAN_FILE = "/var/lib/slurm-fair/plan.json"
local MAX_AGE_S = 180
local PLAN_FORMAT = "1"
local MAX_LINES = 100000
local TRES_FIELDS = { "tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task" }

-- A global table so a test driver can call the pieces (slurmctld ignores it).
slurm_fair = {}
local M = slurm_fair

local function valid_type(t)
  return type(t) == "string" and string.len(t) <= 32 and string.find(t, "^%a[%w_]*$") ~= nil
end

local function valid_class(c)
  return type(c) == "string" and string.len(c) <= 64 and string.find(c, "^%w[%w%._%+%-]*$") ~= nil
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

-- Rewrite a tres_per_* string with gpu_type. Returns new string (or nil if nothing to do),
-- and true when the string already holds a typed GPU request.
function M.rewrite(spec, gpu_type)
  if spec == nil or spec == "" then return nil, false end
  local out, changed = {}, false
  for elem in string.gmatch(spec, "[^,]+") do
    local kind, prefix, count = M.classify(elem)
    if kind == "typed" then return nil, true end
    if kind == "untyped" then
      table.insert(out, prefix .. "gpu:" .. gpu_type .. count)
      changed = true
    else
      table.insert(out, elem)
    end
  end
  if not changed then return nil, false end
  return table.concat(out, ","), false
end

function M.job_class(comment)
  if type(comment) ~= "string" then return "*" end
  local c = string.match(comment, "fair:class=([^%s,;]*)")
  if valid_class(c) then return c end
  return "*"
end

function M.pick_type(plan, account, class)
  local keys = {
    "gpu_type/" .. account .. "/" .. class, "gpu_type/" .. account .. "/*",
    "gpu_type/*/" .. class, "gpu_type/*/*",
  }
  for _, k in ipairs(keys) do
    local t = plan[k]
    if t ~= nil and valid_type(t) then return t, k end
  end
  return nil
end

-- The whole decision for one job. Returns (changes table or nil, reason). Pure apart from
-- reading the plan file.
function M.decide(job_desc, now)
  local specs, untyped = {}, false
  for _, f in ipairs(TRES_FIELDS) do
    local v = job_desc[f]
    if v ~= nil and v ~= "" then
      for elem in string.gmatch(v, "[^,]+") do
        local kind = M.classify(elem)
        if kind == "typed" then return nil, "typed request (" .. f .. "=" .. v .. ")" end
        if kind == "untyped" then untyped = true end
      end
      specs[f] = v
    end
  end
  if not untyped then return nil, "no untyped GPU request" end
  local plan, why = M.read_plan(PLAN_FILE, now)
  if plan == nil then return nil, "plan " .. PLAN_FILE .. " " .. why end
  local account = job_desc.account
  if account == nil or account == "" then account = job_desc.default_account end
  if account == nil or account == "" then account = "*" end
  account = string.lower(account)
  local class = M.job_class(job_desc.comment)
  local gpu_type, key = M.pick_type(plan, account, class)
  if gpu_type == nil then return nil, "no plan entry for " .. account .. "/" .. class end
  local changes = {}
  for f, v in pairs(specs) do
    local new = M.rewrite(v, gpu_type)
    if new ~= nil then changes[f] = new end
  end
  local comment = job_desc.comment
  if comment == nil or comment == "" then
    changes.comment = "fair:auto"
  elseif string.find(comment, "fair:auto", 1, true) == nil then
    changes.comment = comment .. " fair:auto"
  end
  return changes, key .. "=" .. gpu_type .. " (plan cycle " .. tostring(plan["cycle"]) .. ")"
end

local function log(fmt, ...)
  if slurm ~= nil and slurm.log_info ~= nil then slurm.log_info(fmt, ...) end
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local ok, err = pcall(function()
    local changes, why = M.decide(job_desc, os.time())
    if changes == nil then
      if slurm.log_debug ~= nil then slurm.log_debug("slurm-fair: job untouched: %s", why) end
      return
    end
    for f, v in pairs(changes) do
      if f ~= "comment" then job_desc[f] = v end
    end
    if changes.comment ~= nil then job_desc.comment = changes.comment end
    log("slurm-fair: typed GPU request of uid %s: %s", tostring(submit_uid), why)
  end)
  if not ok then
    log("slurm-fair: error, job left as submitted: %s", tostring(err))
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
