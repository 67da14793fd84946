#!/usr/bin/env python3
"""Create the synthesized stack through moto's CloudFormation API and report what it made.

Usage: python3 scripts/cfn-on-moto.py cdk.out/MirrorFleet.template.json [--endpoint URL] [--json OUT]

Without --endpoint it starts `moto_server -H 127.0.0.1 -p PORT` on a free loopback port
and stops it afterwards. It does what `cdk bootstrap` and the CLI's asset publishing do
first (the bootstrap version parameter in SSM, the assets bucket, each file asset zipped
into it), then CreateStack with the template as it is, waits for the stack to settle and
lists every resource with its status and reason, and what moto left unmodelled.
Findings are in docs/adr (the CloudFormation-on-the-emulator ADR).
"""
import argparse, io, json, os, socket, subprocess, sys, tempfile, time, zipfile

import boto3
from botocore.config import Config

ACCOUNT, REGION = "123456789012", "us-east-1"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_moto(log):
    port = free_port()
    proc = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("moto_server did not start")


def zipped(path):
    if os.path.isfile(path):
        return open(path, "rb").read()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for root, _, files in os.walk(path):
            for f in files:
                full = os.path.join(root, f)
                info = zipfile.ZipInfo(os.path.relpath(full, path))
                info.external_attr = (os.stat(full).st_mode & 0o777) << 16
                z.writestr(info, open(full, "rb").read())
    return buf.getvalue()


def server_errors(path):
    """The exceptions moto_server logged: the last line of each traceback."""
    lines = open(path, errors="replace").read().splitlines()
    errs = []
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):
            for j in range(i + 1, len(lines)):
                if not lines[j].startswith(" "):
                    errs.append(lines[j])
                    break
    return errs


def inventory(c):
    """What exists in the emulator after the attempt, by the services' own APIs."""
    calls = {
        "dynamodb tables": lambda: c("dynamodb").list_tables()["TableNames"],
        "vpcs": lambda: [v["VpcId"] for v in c("ec2").describe_vpcs()["Vpcs"] if not v.get("IsDefault")],
        "subnets": lambda: [s["SubnetId"] for s in c("ec2").describe_subnets()["Subnets"] if not s.get("DefaultForAz")],
        "security groups": lambda: [g["GroupName"] for g in c("ec2").describe_security_groups()["SecurityGroups"] if g["GroupName"] != "default"],
        "iam roles": lambda: [r["RoleName"] for r in c("iam").list_roles()["Roles"]],
        "log groups": lambda: [g["logGroupName"] for g in c("logs").describe_log_groups()["logGroups"]],
        "sqs queues": lambda: c("sqs").list_queues().get("QueueUrls", []),
        "sns topics": lambda: [t["TopicArn"] for t in c("sns").list_topics()["Topics"]],
        "kms keys": lambda: [k["KeyId"] for k in c("kms").list_keys()["Keys"]],
        "event buses": lambda: [b["Name"] for b in c("events").list_event_buses()["EventBuses"] if b["Name"] != "default"],
        "efs file systems": lambda: [f["FileSystemId"] for f in c("efs").describe_file_systems()["FileSystems"]],
        "lambda functions": lambda: [f["FunctionName"] for f in c("lambda").list_functions()["Functions"]],
        "ecs clusters": lambda: c("ecs").list_clusters()["clusterArns"],
        "load balancers": lambda: [l["LoadBalancerName"] for l in c("elbv2").describe_load_balancers()["LoadBalancers"]],
    }
    got = {}
    for name, call in calls.items():
        try:
            got[name] = len(call())
        except Exception as e:
            got[name] = f"error: {e}"[:120]
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("template")
    ap.add_argument("--endpoint")
    ap.add_argument("--json")
    ap.add_argument("--without-outputs", action="store_true",
                    help="diagnosis only: drop the template's Outputs (moto 5.2.1 fails CreateStack on an output that "
                         "reads an attribute of a type it does not model), every resource kept")
    args = ap.parse_args()
    proc = None
    endpoint = args.endpoint
    log = tempfile.NamedTemporaryFile(prefix="cfn-on-moto-", suffix=".log", delete=False)
    if not endpoint:
        proc, endpoint = start_moto(log)
    try:
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        c = lambda svc: boto3.client(svc, endpoint_url=endpoint, region_name=REGION,
                                     config=Config(retries={"max_attempts": 1}))
        out = {"endpoint": endpoint, "moto": subprocess.run(["python3", "-c", "import moto;print(moto.__version__)"],
                                                             capture_output=True, text=True).stdout.strip()}
        # What cdk bootstrap leaves: the version parameter and the assets bucket.
        c("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String", Overwrite=True)
        bucket = f"cdk-hnb659fds-assets-{ACCOUNT}-{REGION}"
        c("s3").create_bucket(Bucket=bucket)
        cdkout = os.path.dirname(os.path.abspath(args.template))
        manifest = os.path.join(cdkout, os.path.basename(args.template).replace(".template.json", ".assets.json"))
        assets = json.load(open(manifest)).get("files", {})
        for h, a in assets.items():
            for dest in a["destinations"].values():
                c("s3").put_object(Bucket=bucket, Key=dest["objectKey"], Body=zipped(os.path.join(cdkout, a["source"]["path"])))
        template = open(args.template).read()
        if args.without_outputs:
            t = json.loads(template)
            out["outputs_dropped"] = sorted(t.pop("Outputs", {}))
            template = json.dumps(t)
        cfn = c("cloudformation")
        t0 = time.time()
        try:
            cfn.create_stack(StackName="MirrorFleet", TemplateBody=template,
                             Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"])
        except Exception as e:  # a refusal of the template as a whole
            out["create_stack_error"] = str(e)
        # moto creates a stack's resources within CreateStack: one still in progress
        # after it answered is one it gave up on.
        status, reason = None, None
        for _ in range(20):
            try:
                st = cfn.describe_stacks(StackName="MirrorFleet")["Stacks"][0]
            except Exception as e:
                out["describe_error"] = str(e)
                break
            status, reason = st["StackStatus"], st.get("StackStatusReason")
            if not status.endswith("IN_PROGRESS"):
                break
            time.sleep(0.5)
        out["stack_status"], out["stack_reason"], out["seconds"] = status, reason, round(time.time() - t0, 1)
        declared = json.loads(template)["Resources"]
        made = {}
        try:
            for r in cfn.describe_stack_resources(StackName="MirrorFleet")["StackResources"]:
                made[r["LogicalResourceId"]] = {"type": r["ResourceType"], "status": r["ResourceStatus"],
                                                "physical": r.get("PhysicalResourceId"),
                                                "reason": r.get("ResourceStatusReason")}
        except Exception as e:
            out["resources_error"] = str(e)
        events = []
        try:
            for e in cfn.describe_stack_events(StackName="MirrorFleet")["StackEvents"]:
                if "FAILED" in e["ResourceStatus"]:
                    events.append({"id": e["LogicalResourceId"], "type": e["ResourceType"],
                                   "status": e["ResourceStatus"], "reason": e.get("ResourceStatusReason")})
        except Exception as e:
            out["events_error"] = str(e)
        out["failed_events"] = events
        from moto.cloudformation.parsing import resource_class_from_type
        out["unmodelled_types"] = sorted({v["Type"] for v in declared.values() if resource_class_from_type(v["Type"]) is None})
        out["resources"] = {k: made.get(k, {"type": v["Type"], "status": "NOT IN STACK"}) for k, v in declared.items()}
        out["server_errors"] = server_errors(log.name) if proc else []
        out["inventory"] = inventory(c)
        by = {}
        for k, v in out["resources"].items():
            by.setdefault(v["status"], {}).setdefault(v["type"], 0)
            by[v["status"]][v["type"]] += 1
        out["by_status"] = by
        if args.json:
            json.dump(out, open(args.json, "w"), indent=1, sort_keys=True)
        print(f"moto {out['moto']}: stack {status} in {out['seconds']} s {reason or ''}")
        if made:
            for s, types in sorted(by.items()):
                print(f"  {s}: " + ", ".join(f"{t} ×{n}" for t, n in sorted(types.items())))
        else:
            print(f"  the stack's resources: unreadable ({out.get('resources_error', 'none listed')[:100]})")
        for e in events:
            print(f"  FAILED {e['id']} ({e['type']}): {e['reason']}")
        for e in out["server_errors"]:
            print(f"  moto_server error: {e}")
        print("  made anyway (the services' own APIs): " + json.dumps(out["inventory"]))
        print("  types moto's CloudFormation does not model: " + ", ".join(out["unmodelled_types"]))
        if "create_stack_error" in out:
            print("  CreateStack refused:", out["create_stack_error"])
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=10)
        os.unlink(log.name)


if __name__ == "__main__":
    main()
