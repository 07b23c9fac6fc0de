-- Argo CD health for Onceflow's Pipeline, KafkaSource and SparkJob (the same script
-- for all three: they share Ready / Progressing / Degraded conditions). Install it
-- under resource.customizations.health.onceflow.io_<Kind> in argocd-cm.
local health = {status = "Progressing", message = "waiting for the operator"}
if obj.status == nil or obj.status.conditions == nil then
  return health
end
if obj.status.observedGeneration ~= nil and obj.metadata.generation ~= nil
    and obj.status.observedGeneration < obj.metadata.generation then
  health.message = "the operator has not seen the latest spec yet"
  return health
end
local found = {}
for _, condition in ipairs(obj.status.conditions) do
  found[condition.type] = condition
end
local degraded, ready, progressing = found["Degraded"], found["Ready"], found["Progressing"]
if degraded ~= nil and degraded.status == "True" then
  return {status = "Degraded", message = (degraded.reason or "") .. ": " .. (degraded.message or "")}
end
if ready ~= nil and ready.status == "True" then
  return {status = "Healthy", message = ready.message or ""}
end
if progressing ~= nil and progressing.status == "True" then
  health.message = progressing.message or progressing.reason or health.message
elseif ready ~= nil then
  health.message = ready.message or ready.reason or health.message
end
return health
