-- Test driver for the rendered job_submit.lua, run as: lua5.1 lua_driver.lua SCRIPT CASE ARGS...
-- Loads SCRIPT with a stub `slurm` table (as slurmctld would), runs one case and prints
-- "key=value" lines the Python test reads. No shell involved: argv only.
slurm = {
  SUCCESS = 0, ERROR = -1,
  logged = {},
  log_info = function(fmt, ...) table.insert(slurm.logged, string.format(fmt, ...)) end,
  log_debug = function(fmt, ...) table.insert(slurm.logged, string.format(fmt, ...)) end,
}
local script, case = arg[1], arg[2]
local rc = dofile(script)
print("load_rc=" .. tostring(rc))

local function show(v) if v == nil then return "nil" end return tostring(v) end

if case == "classify" then
  local kind, prefix, count = slurm_fair.classify(arg[3])
  print("kind=" .. show(kind)); print("prefix=" .. show(prefix)); print("count=" .. show(count))
elseif case == "class" then
  print("class=" .. show(slurm_fair.job_class(arg[3])))
elseif case == "read_plan" then
  local plan, why = slurm_fair.read_plan(arg[3], tonumber(arg[4]))
  print("ok=" .. show(plan ~= nil)); print("why=" .. show(why))
  if plan then for k, v in pairs(plan) do print("plan." .. k .. "=" .. v) end end
elseif case == "submit" then
  -- ARGS: now field=value ... ; the job_desc is a plain table; os.time is pinned to `now`;
  -- part_list holds "gpu" (the default partition) and the partitions named by default_part=
  local now = tonumber(arg[3])
  os.time = function() return now end
  local job = {}
  local parts = { gpu = { name = "gpu", flag_default = 1 } }
  for i = 4, #arg do
    local k, v = string.match(arg[i], "^([%w_]+)=(.*)$")
    if k == "default_part" then
      parts = { [v] = { name = v, flag_default = 1 } }
    else
      job[k] = v
    end
  end
  local rc2 = slurm_job_submit(job, parts, 1000)
  print("rc=" .. show(rc2))
  for _, f in ipairs({ "tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task", "comment",
                       "partition", "admin_comment", "qos" }) do
    print(f .. "=" .. show(job[f]))
  end
  for _, l in ipairs(slurm.logged) do print("log=" .. l) end
elseif case == "prefer" then
  -- ARGS: "t1 t2 ..." "t=speed ..." "roomy types" "t=tier ..."; prints one line per case
  local cands = slurm_fair.words(arg[3])
  local speed = slurm_fair.speeds(arg[4])
  local room = {}
  for _, t in ipairs(slurm_fair.words(arg[5])) do room[t] = true end
  local tier = {}
  for t, v in string.gmatch(arg[6] or "", "([%w_]+)=(%d+)") do tier[t] = tonumber(v) end
  print("offered=" .. table.concat(slurm_fair.prefer(cands, speed, room, tier), " "))
elseif case == "user_choice" then
  -- ARGS: field=value ... of a job_desc; prints the reason ("nil": none) and the fit exclusion
  local job = {}
  for i = 3, #arg do
    local k, v = string.match(arg[i], "^([%w_]+)=(.*)$")
    job[k] = v
  end
  local asked = type(job.partition) == "string" and job.partition ~= ""
  print("choice=" .. show(slurm_fair.user_choice(job, asked)))
  print("beyond=" .. show(slurm_fair.beyond_shapes(job)))
elseif case == "fits" then
  -- ARGS: shapes gpus nodes cpus mem
  local need = { gpus = tonumber(arg[4]), nodes = tonumber(arg[5]), cpus = tonumber(arg[6]), mem = tonumber(arg[7]) }
  print("fits=" .. show(slurm_fair.fits(arg[3], need)))
elseif case == "submit_error" then
  -- a job_desc whose field access raises: the plugin must still return SUCCESS
  local job = setmetatable({}, { __index = function() error("boom") end })
  print("rc=" .. show(slurm_job_submit(job, {}, 0)))
  for _, l in ipairs(slurm.logged) do print("log=" .. l) end
elseif case == "modify" then
  print("rc=" .. show(slurm_job_modify({ tres_per_node = "gres:gpu:2" }, {}, {}, 0)))
end
