package slurm

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// decodeJob reads a job's fields, noting in missing those it lacks.
func decodeJob(f object, missing map[string]bool) Job {
	const at = "jobs[]"
	j := Job{
		Name:      f.str(missing, at, "name"),
		Reason:    f.str(missing, at, "state_reason"),
		Account:   f.str(missing, at, "account"),
		Partition: f.str(missing, at, "partition"),
		QOS:       f.str(missing, at, "qos"),
		User:      f.str(missing, at, "user_name"),
		NodeList:  f.str(missing, at, "nodes"),
	}
	if v, ok := f["batch_flag"]; ok {
		var batch bool
		j.NotBatch = json.Unmarshal(v, &batch) == nil && !batch
	}
	id, _ := f.num(missing, at, "job_id")
	j.ID = strconv.FormatInt(id, 10)
	if arr, ok := f["array_task_id"]; ok {
		if task, inf, ok := number(arr); ok && !inf && task >= 0 && string(arr) != "null" {
			if parent, inf, ok := number(f["array_job_id"]); ok && !inf && parent > 0 {
				j.Array = strconv.FormatInt(parent, 10) + "_" + strconv.FormatInt(task, 10)
			}
		}
	}
	j.Tasks = 1
	if v, ok := f["array_task_string"]; ok {
		if s, _ := text(v); s != "" {
			j.Array = strconv.FormatInt(id, 10) + "_[" + s + "]"
			j.Tasks = arrayTasks(s)
			if most, inf, ok := number(f["array_max_tasks"]); ok && !inf && most > 0 {
				j.Throttle = int(min(most, maxTasks))
				j.Tasks = min(j.Tasks, j.Throttle)
			}
		}
	}
	if v, ok := f.first("job_state", "state"); ok {
		if s := strs(v); len(s) > 0 {
			j.State = strings.ToUpper(s[0])
		}
	} else {
		missing[at+".job_state"] = true
	}
	j.Priority, _ = f.num(missing, at, "priority")
	nodes, _ := f.num(missing, at, "node_count")
	j.Nodes = int(min(max(nodes, 1), 1<<20))
	if v, ok := f.first("tres_per_node"); ok {
		s, _ := text(v)
		j.GPUsPerNode, j.GPUType = gpuRequest(s)
	}
	if v, ok := f.first("tres_per_job"); ok {
		s, _ := text(v)
		var typ string
		if j.GPUsPerJob, typ = gpuRequest(s); j.GPUType == "" {
			j.GPUType = typ
		}
	}
	sub, inf := f.num(missing, at, "submit_time")
	j.Submit = unixTime(sub, inf)
	el, inf := f.num(missing, at, "eligible_time")
	j.Eligible = unixTime(el, inf)
	st, inf := f.num(missing, at, "start_time")
	j.Start = unixTime(st, inf)
	if limit, inf := f.num(missing, at, "time_limit"); !inf && limit > 0 && limit < 1<<31 {
		j.TimeLimit = time.Duration(limit) * time.Minute // minutes
	}
	return j
}

// decodeNode reads a node's fields, noting in missing those it lacks.
func decodeNode(f object, missing map[string]bool) Node {
	const at = "nodes[]"
	n := Node{
		Name:    f.str(missing, at, "name", "hostname"),
		Address: f.str(missing, at, "address"),
		Reason:  f.str(missing, at, "reason"),
	}
	if v, ok := f.first("state"); ok {
		s := strs(v)
		if len(s) > 0 {
			n.State = strings.ToUpper(s[0])
		}
		for _, x := range s[min(1, len(s)):] {
			n.Flags = append(n.Flags, strings.ToUpper(x))
		}
	} else {
		missing[at+".state"] = true
	}
	if v, ok := f.first("state_flags"); ok {
		for _, x := range strs(v) {
			n.Flags = append(n.Flags, strings.ToUpper(x))
		}
	}
	if v, ok := f.first("partitions"); ok {
		n.Partitions = strs(v)
	} else {
		missing[at+".partitions"] = true
	}
	gres := f.str(missing, at, "gres")
	n.GPUs, n.GPUType = gpuRequest(gres)
	if v, ok := f.first("gres_used"); ok {
		s, _ := text(v)
		n.GPUsUsed, _ = gpuRequest(s)
	}
	return n
}

// gpuRequest reads the GPUs of a TRES or gres list: "gres:gpu:8",
// "gres:gpu:a100:2", "gres/gpu:4", "gres/gpu=4", "gres/gpu:h100=8",
// "gpu:a100:8(S:0-1)", "gpu:a100:4(IDX:0-3)", among other resources
// ("cpu=4,gres/gpu=8"): the count (summed over its lines) and the type
// (the first named; "" for any).
func gpuRequest(s string) (count int, typ string) {
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if i := strings.IndexByte(item, '('); i >= 0 {
			item = item[:i] // "(IDX:0-3)", "(S:0-1)"
		}
		item = strings.TrimPrefix(strings.TrimPrefix(item, "gres:"), "gres/")
		name, rest, _ := strings.Cut(item, ":")
		if eq := strings.IndexByte(name, '='); eq >= 0 {
			name, rest = name[:eq], name[eq+1:]
		} else if eq := strings.LastIndexByte(rest, '='); eq >= 0 {
			rest = rest[:eq] + ":" + rest[eq+1:]
		}
		if name != "gpu" {
			continue
		}
		parts := strings.Split(rest, ":")
		n, err := strconv.Atoi(parts[len(parts)-1])
		switch {
		case rest == "":
			n, err = 1, nil // "gpu": one
		case err != nil && len(parts) == 1:
			typ, n, err = cmpType(typ, parts[0]), 1, nil // "gpu:a100": one of the type
		}
		if err != nil || n < 0 || n > 1<<20 {
			continue
		}
		if len(parts) > 1 {
			typ = cmpType(typ, parts[0])
		}
		count += n
	}
	return min(count, 1<<20), typ
}

// cmpType keeps the first GPU type named.
func cmpType(have, next string) string {
	if have != "" {
		return have
	}
	return next
}

// maxTasks bounds the tasks one record stands for.
const maxTasks = 1 << 20

// arrayTasks counts the tasks of an array's index list, as squeue prints
// a pending array's: "0-9", "1,3,5-7", "0-15:4", "0-99%10" (the throttle
// is array_max_tasks'). A part it cannot read counts as one task.
func arrayTasks(s string) int {
	s, _, _ = strings.Cut(s, "%")
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		span, step := part, 1
		if a, b, ok := strings.Cut(part, ":"); ok {
			if st, err := strconv.Atoi(b); err == nil && st > 0 {
				span, step = a, st
			}
		}
		lo, hi, ok := strings.Cut(span, "-")
		from, err1 := strconv.Atoi(lo)
		to, err2 := strconv.Atoi(hi)
		switch {
		case ok && err1 == nil && err2 == nil && to >= from:
			n += (to-from)/step + 1
		default:
			n++
		}
		if n >= maxTasks {
			return maxTasks
		}
	}
	return max(n, 1)
}
