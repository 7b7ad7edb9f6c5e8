package wire

import (
	"encoding/json"
	"fmt"
)

// ResultMessage is result r of the task with id and subject as stored on
// ResultSubject: the task's id and subject in headers, the deduplication
// id that keeps one result per task, and r as JSON. The worker that ran
// the task and the bus that dead-letters it both store results with it;
// ParseResult reads them.
func ResultMessage(id, subject string, r Result) (hdr map[string][]string, body []byte, err error) {
	body, err = json.Marshal(r)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the result of task %s: %w", id, err)
	}
	return map[string][]string{
		TaskIDHeader:      {id},
		TaskSubjectHeader: {subject},
		MsgIDHeader:       {ResultMsgID(id)},
	}, body, nil
}

// ParseResult reads a message stored on ResultSubject: the result, with
// its task id from the headers where the body lacks it.
func ParseResult(h map[string][]string, body []byte) (Result, error) {
	var r Result
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("the result is not JSON (%v): %.200q", err, body)
	}
	if r.TaskID == "" {
		r.TaskID = header(h, TaskIDHeader)
	}
	return r, nil
}
